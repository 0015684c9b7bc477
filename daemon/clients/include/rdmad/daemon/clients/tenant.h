// Who a client connection belongs to for quotas, release and listings: its Kubernetes pod when the
// process that connected runs in one (read from /proc/<pid>/cgroup at accept), else its uid.
#pragma once

#include <sys/types.h>

#include <compare>
#include <optional>
#include <string>
#include <string_view>

#include "rdmad/daemon/clients/result.h"

namespace rdmad::clients {

struct Tenant {
  std::string pod_uid;  // a pod's metadata.uid (lower case, dashes); empty: not in a pod
  uid_t uid = 0;        // outside pods; 0 for a pod tenant (its processes may run as several uids)

  static Tenant of_uid(uid_t uid) { return Tenant{"", uid}; }
  static Tenant of_pod(std::string pod) { return Tenant{std::move(pod), 0}; }
  bool is_pod() const { return !pod_uid.empty(); }
  // "pod 8f2c6a8e-..." or "uid 1000", for messages and logs.
  std::string name() const;
  auto operator<=>(const Tenant&) const = default;
};

// The pod UID in a cgroup path of the kubelet's two drivers, or nullopt outside a pod:
//   systemd:  /kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<UID with _>.slice/cri-....scope
//   cgroupfs: /kubepods/burstable/pod<UID>/<container id>  (and /kubepods/pod<UID>/... for Guaranteed)
// A path without a "kubepods" component is never a pod's, whatever its names say.
std::optional<std::string> pod_uid_of_cgroup_path(std::string_view path);

// The pod UID in the text of /proc/<pid>/cgroup: the cgroup v2 line ("0::/path") when it is a pod's,
// else (cgroup v1, where that line may be "0::/") the first controller line whose path is a pod's.
std::optional<std::string> pod_uid_of_cgroup_file(std::string_view text);

// The tenant of the process `pid` of `uid`: reads <proc_root>/<pid>/cgroup. An error when it cannot
// be read (the process exited between connect and accept, or /proc hides it): the caller refuses
// the connection rather than guess. pid 0 (a client in a pid namespace the daemon cannot see) is
// the uid's tenant.
Result<Tenant> tenant_of_process(const std::string& proc_root, pid_t pid, uid_t uid);

}  // namespace rdmad::clients
