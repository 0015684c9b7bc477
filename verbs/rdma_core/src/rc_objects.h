#pragma once
// The rdma_core implementation of the verbs interface. Private to the backend.
#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "rdmad/nic_cc/sysfs_root.h"
#include "rdmad/verbs/device.h"
#include "device_caps.h"
#include "device_info.h"
#include "gid_selector.h"
#include "handles.h"
#include "rc_options.h"
#include "split_keys.h"
#include "wr_mapping.h"
#include "rdmad/verbs/registry.h"

namespace rdmad::verbs::rdma_core {

// What every object of one opened device shares; children hold it, so it outlives them.
struct DeviceState {
  Context ctx;
  nic_cc::SysfsRoot root;
  RdmaCoreConfig config;
  DeviceInfo sysfs;  // facts read at open
  DeviceCaps caps;

  // Reads the GID table of `port` (ibv_query_gid_table, sysfs when that fails) and applies the
  // config's rule.
  GidChoice select_gid_now(uint8_t port) const;
  // How QPs of the configured port address their peers right now.
  Result<PathConfig> path_config() const;
  const PortInfo* sysfs_port(uint8_t port) const;
};

class RcDevice final : public Device {
 public:
  explicit RcDevice(std::shared_ptr<DeviceState> state);
  const verbs::DeviceInfo& info() const override { return info_; }
  Result<verbs::PortInfo> query_port(uint8_t port_num) const override;
  Result<std::unique_ptr<verbs::ProtectionDomain>> alloc_pd() override;
  Result<std::unique_ptr<verbs::CompletionQueue>> create_cq(uint32_t depth) override;
  int event_fd() const override;
  std::vector<verbs::DeviceEvent> read_events() override;
  NicCounters counters() const override;
  const DeviceState& state() const { return *state_; }

 private:
  std::shared_ptr<DeviceState> state_;
  verbs::DeviceInfo info_;
  bool events_ok_ = false;  // the async fd is non-blocking and may be watched
};

class RcMemoryRegion final : public verbs::MemoryRegion {
 public:
  RcMemoryRegion(std::vector<rdma_core::MemoryRegion> slices, SplitKeys keys, uint32_t access,
                 std::shared_ptr<SplitKeyTable> table);
  ~RcMemoryRegion() override;
  uint64_t addr() const override { return keys_.addr; }
  size_t length() const override { return keys_.length; }
  uint32_t lkey() const override { return keys_.lkeys[0]; }
  uint32_t rkey() const override { return keys_.rkeys[0]; }
  uint32_t access() const override { return access_; }
  const SplitKeys& keys() const { return keys_; }
  std::optional<RemoteSlices> remote_slices() const override;

 private:
  std::vector<rdma_core::MemoryRegion> slices_;
  SplitKeys keys_;
  uint32_t access_;
  std::shared_ptr<SplitKeyTable> table_;  // set when split
};

class RcProtectionDomain final : public verbs::ProtectionDomain {
 public:
  RcProtectionDomain(std::shared_ptr<DeviceState> state, rdma_core::ProtectionDomain pd);
  Result<std::unique_ptr<verbs::MemoryRegion>> reg_mr(void* addr, size_t length, uint32_t access) override;
  Result<std::unique_ptr<verbs::MemoryRegion>> reg_dmabuf_mr(int fd, uint64_t offset, size_t length,
                                                             uint64_t iova, uint32_t access) override;
  Result<std::unique_ptr<verbs::QueuePair>> create_qp(const QpInitAttr& attr) override;

 private:
  std::shared_ptr<DeviceState> state_;
  rdma_core::ProtectionDomain pd_;
  std::shared_ptr<SplitKeyTable> split_;
};

class RcCompletionQueue final : public verbs::CompletionQueue {
 public:
  // `channel` (non-blocking fd) is the CQ's own completion channel, or empty.
  RcCompletionQueue(std::optional<rdma_core::CompletionChannel> channel, rdma_core::CompletionQueue cq,
                    uint32_t depth)
      : channel_(std::move(channel)), cq_(std::move(cq)), depth_(depth) {}
  size_t poll(std::span<WorkCompletion> out) override;
  uint32_t depth() const override { return depth_; }
  int notify_fd() const override { return channel_ ? channel_->fd() : -1; }
  Status request_notify() override;
  void ack_notify() override;
  const rdma_core::CompletionQueue& handle() const { return cq_; }

 private:
  std::optional<rdma_core::CompletionChannel> channel_;  // destroyed after the CQ (declared first)
  rdma_core::CompletionQueue cq_;
  uint32_t depth_;
};

class RcQueuePair final : public verbs::QueuePair {
 public:
  // `cap`: the queues' real depths (ibv_query_qp), which a device may round up from the request.
  RcQueuePair(std::shared_ptr<DeviceState> state, rdma_core::QueuePair qp,
              std::shared_ptr<SplitKeyTable> split, QpCap cap);
  uint32_t qp_num() const override { return qp_.qp_num(); }
  Status modify(const QpAttr& attr, uint32_t mask) override;
  QpAttr query() const override;
  Status post_send(std::span<const SendWr> wrs, size_t* posted) override;
  Status post_recv(std::span<const RecvWr> wrs, size_t* posted) override;

 private:
  std::shared_ptr<DeviceState> state_;
  rdma_core::QueuePair qp_;
  std::shared_ptr<SplitKeyTable> split_;
  mutable std::mutex attr_mu_;  // modify/query only, never the datapath
  QpAttr attr_;  // attr_.cap is set once, at creation
  // Last state set through modify(): the posting threads check it without the lock.
  std::atomic<QpState> qp_state_{QpState::kReset};
};

// Status for a failed verb: ENOMEM/EAGAIN are back-pressure, EOPNOTSUPP not-supported, else error.
Status status_from_errno(int err, std::string message);

}  // namespace rdmad::verbs::rdma_core
