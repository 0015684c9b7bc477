// Initialisation, devices, connection set-up, registration and teardown (comm.cc: the data path).
#include "plugin.h"

#include <dlfcn.h>
#include <unistd.h>

#include <climits>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "host_memfd.h"

namespace rdmad::nccl {
namespace {

constexpr size_t kMaxDevices = 64;  // devices_ never reallocates: NCCL keeps the name pointers
constexpr auto kFlowConnectTimeout = std::chrono::seconds(30);
constexpr uint32_t kAccess = RDMAD_ACCESS_LOCAL_WRITE | RDMAD_ACCESS_REMOTE_WRITE | RDMAD_ACCESS_REMOTE_READ;

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

std::string env(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : fallback;
}

std::string sysfs_pci_path(const char* pci_address) {
  if (pci_address[0] == '\0') return "";
  std::string p = std::string("/sys/bus/pci/devices/") + pci_address;
  char resolved[PATH_MAX];
  return realpath(p.c_str(), resolved) != nullptr ? resolved : "";
}

bool cuda_driver_present() {
  void* h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
  if (h == nullptr) return false;
  dlclose(h);
  return true;
}

}  // namespace

Plugin& Plugin::get() {
  static Plugin* p = new Plugin;  // never destroyed: NCCL may call in from its threads at exit
  return *p;
}

void Plugin::log(abi::LogLevel level, const char* fmt, ...) const {
  char line[1024];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(line, sizeof(line), fmt, ap);
  va_end(ap);
  if (log_ != nullptr) {
    log_(level, level == abi::kLogWarn ? abi::kSubsysAll : abi::kSubsysNet, __FILE__, __LINE__, "NET/rdmad : %s",
         line);
  } else if (level == abi::kLogWarn) {
    std::fprintf(stderr, "NET/rdmad : %s\n", line);
  }
}

abi::Result Plugin::fail(abi::Result r, const std::string& what) const {
  log(abi::kLogWarn, "%s", what.c_str());
  return r;
}

abi::Result Plugin::init(abi::Logger logger) {
  std::lock_guard lock(mu_);
  if (logger != nullptr) log_ = logger;
  if (init_result_ >= 0) return static_cast<abi::Result>(init_result_);
  auto done = [this](abi::Result r) {
    init_result_ = r;
    return r;
  };
  // Not reaching rdmad is no error of NCCL's: it says so at INFO and uses its own transports.
  if (rdmad_connect(nullptr, &client_) != RDMAD_OK) {
    log(abi::kLogInfo, "rdmad is not reachable (%s); not using it", rdmad_last_error(nullptr));
    return done(abi::kSystemError);
  }
  char node[RDMAD_NODE_ID_BYTES];
  if (rdmad_node_id(client_, node) != RDMAD_OK) {
    log(abi::kLogInfo, "rdmad on this node serves no flows (%s); not using it", rdmad_last_error(client_));
    return done(abi::kSystemError);
  }
  node_ = node;
  rdmad_nic_info nics[RDMAD_MAX_NICS];
  size_t count = 0;
  if (rdmad_query_nics(client_, nics, RDMAD_MAX_NICS, &count) != RDMAD_OK || count == 0) {
    log(abi::kLogInfo, "rdmad has no NIC (%s); not using it", count == 0 ? "none configured" : rdmad_last_error(client_));
    return done(abi::kSystemError);
  }
  count = std::min<size_t>(count, RDMAD_MAX_NICS);
  const std::string mode = env("RDMAD_NCCL_DEVICES", "node");
  if (mode != "node" && mode != "nic")
    return done(fail(abi::kInvalidUsage, "RDMAD_NCCL_DEVICES=" + mode + ": expected node or nic"));
  // GPU memory goes through dma-buf, which a hardware NIC reads; the soft backend cannot.
  bool hardware = false;
  for (size_t i = 0; i < count; ++i) hardware |= std::strcmp(nics[i].backend, "soft") != 0;
  const bool gpu = hardware && env("RDMAD_NCCL_GPU", "1") != "0" && cuda_driver_present();
  const int ptr = abi::kPtrHost | (gpu ? abi::kPtrCuda | abi::kPtrDmabuf : 0);
  devices_.reserve(kMaxDevices);
  if (mode == "node") {
    Device d;
    d.name = "rdmad";
    d.guid = fnv1a(node_);
    for (size_t i = 0; i < count; ++i) d.speed_mbps += nics[i].speed_mbps != 0 ? static_cast<int>(nics[i].speed_mbps) : 10000;
    d.ptr_support = ptr;
    devices_.push_back(d);
  } else {
    for (size_t i = 0; i < count; ++i) {
      Device d;
      d.name = nics[i].name;
      d.pci_path = sysfs_pci_path(nics[i].pci_address);
      d.guid = fnv1a(node_ + "/" + nics[i].name);
      d.speed_mbps = nics[i].speed_mbps != 0 ? static_cast<int>(nics[i].speed_mbps) : 10000;
      d.nic_mask = 1u << nics[i].index;
      d.ptr_support = ptr;
      devices_.push_back(d);
    }
  }
  std::string error;
  if (!choose_address(&address_, &error, &interface_))
    return done(fail(abi::kSystemError, "no address for the rendezvous socket: " + error));
  size_t cache_mb = 1024;
  if (const char* v = std::getenv("RDMAD_NCCL_STAGING_CACHE_MB"); v != nullptr && *v != '\0') cache_mb = std::strtoull(v, nullptr, 10);
  staging_ = std::make_unique<StagingPool>(client_, cache_mb << 20);
  log(abi::kLogInfo, "node %s, %zu device(s) (RDMAD_NCCL_DEVICES=%s), %zu NIC(s), GPU memory %s, rendezvous on %s %s",
      node_.c_str(), devices_.size(), mode.c_str(), count, gpu ? "by dma-buf" : "staged through host memory",
      interface_.c_str(), address_string(address_, false).c_str());
  return done(abi::kSuccess);
}

abi::Result Plugin::devices(int* n) {
  std::lock_guard lock(mu_);
  *n = static_cast<int>(devices_.size());
  return abi::kSuccess;
}

abi::Result Plugin::properties(int dev, abi::PropertiesV9* p) {
  std::lock_guard lock(mu_);
  if (dev < 0 || static_cast<size_t>(dev) >= devices_.size()) return abi::kInvalidArgument;
  const Device& d = devices_[static_cast<size_t>(dev)];
  std::memset(p, 0, sizeof(*p));
  p->name = const_cast<char*>(d.name.c_str());
  p->pci_path = d.pci_path.empty() ? nullptr : const_cast<char*>(d.pci_path.c_str());
  p->guid = d.guid;
  p->ptr_support = d.ptr_support;
  p->reg_is_global = 1;  // registrations belong to the process's one daemon connection, not to a comm
  p->force_flush = 0;
  p->speed = d.speed_mbps;
  p->port = 1;
  p->latency = 0;
  p->max_comms = 65536;
  p->max_recvs = kMaxRecvs;
  p->device_type = abi::kDeviceHost;
  p->device_version = 0;
  if (d.members.empty()) {
    p->vprops.ndevs = 1;
    p->vprops.devs[0] = dev;
  } else {
    p->vprops.ndevs = static_cast<int>(d.members.size());
    for (size_t i = 0; i < d.members.size(); ++i) p->vprops.devs[i] = d.members[i];
  }
  p->max_p2p_bytes = size_t{1} << 30;
  p->max_coll_bytes = size_t{1} << 30;
  return abi::kSuccess;
}

uint64_t Plugin::channel_of(uint64_t comm_id, int tag) {
  uint64_t z = comm_id + 0x9e3779b97f4a7c15ull * (static_cast<uint64_t>(static_cast<uint32_t>(tag)) + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

std::unique_ptr<Comm> Plugin::make_comm(bool send, int dev, std::string peer, uint64_t comm_id, int socket) {
  auto c = std::make_unique<Comm>();
  c->send = send;
  c->dev = dev;
  c->peer = std::move(peer);
  c->comm_id = comm_id;
  c->socket = socket;
  c->next_liveness = Clock::now() + kFlowConnectTimeout;  // until then: the flow's connect deadline
  return c;
}

abi::Result Plugin::open_stream(Comm& c, int tag, Stream** out) {
  auto it = c.streams.find(tag);
  if (it != c.streams.end()) {
    *out = it->second.get();
    return abi::kSuccess;
  }
  rdmad_flow_attr attr{};
  attr.channel = channel_of(c.comm_id, tag);
  auto s = std::make_unique<Stream>();
  s->tag = tag;
  // A per-NIC device's comms stay on its NIC while it is up (and move to the others while it is not).
  const uint32_t mask = devices_[static_cast<size_t>(c.dev)].nic_mask;
  if (rdmad_flow_open_nics(client_, c.peer.c_str(), &attr, mask, &s->flow) != RDMAD_OK)
    return fail(abi::kSystemError, "opening a flow to node " + c.peer + ": " + rdmad_last_error(client_));
  *out = s.get();
  c.streams.emplace(tag, std::move(s));
  return abi::kSuccess;
}

// The comm's first flow is connected: the daemons have their queue pairs up.
bool Plugin::comm_ready(Comm& c, std::string* error) {
  Stream* s = c.streams.begin()->second.get();
  switch (rdmad_flow_get_state(s->flow)) {
    case RDMAD_FLOW_CONNECTED:
      c.next_liveness = Clock::now();
      return true;
    case RDMAD_FLOW_FAILED:
      *error = "the flow to node " + c.peer + " failed (rdmad stopped?)";
      return false;
    default:
      if (Clock::now() > c.next_liveness)
        *error = "rdmad is not connected to node " + c.peer + "'s rdmad within 30 s (is the node in [[peers]], is its rdmad up?)";
      return false;
  }
}

abi::Result Plugin::listen(int dev, void* handle, void** listen_comm) {
  std::lock_guard lock(mu_);
  if (dev < 0 || static_cast<size_t>(dev) >= devices_.size()) return abi::kInvalidArgument;
  auto l = std::make_unique<ListenComm>();
  l->dev = dev;
  std::string error;
  if (!l->listener.open(address_, &error)) return fail(abi::kSystemError, error);
  auto* h = static_cast<WireHandle*>(handle);
  l->listener.fill(h, node_);
  l->comm_id = h->comm_id;
  *listen_comm = l.release();
  return abi::kSuccess;
}

ConnectStage* Plugin::stage_of(const WireHandle& h) {
  if (h.stage_id == 0) return nullptr;
  auto it = connecting_.find(h.stage_id);
  if (it == connecting_.end()) return nullptr;
  return std::memcmp(it->second->identity, &h, kHandleIdentityBytes) == 0 ? it->second.get() : nullptr;
}

void Plugin::drop_stage(WireHandle* h) {
  auto it = connecting_.find(h->stage_id);
  if (it != connecting_.end()) {
    if (it->second->comm) close_streams(*it->second->comm);
    connecting_.erase(it);
  }
  h->stage_id = 0;
}

abi::Result Plugin::connect(int dev, void* handle, void** send_comm) {
  std::lock_guard lock(mu_);
  *send_comm = nullptr;
  if (dev < 0 || static_cast<size_t>(dev) >= devices_.size()) return abi::kInvalidArgument;
  auto* h = static_cast<WireHandle*>(handle);
  // The handle's stage_id came from the other node the first time: an id that names no connect of
  // this very handle (garbage, or another handle's) is not ours, and a new connect starts.
  ConnectStage* stage = stage_of(*h);
  std::string error;
  auto abort = [&](abi::Result r, const std::string& why) {
    drop_stage(h);
    return fail(r, why);
  };
  if (stage == nullptr) {
    if (std::memchr(h->node, '\0', sizeof(h->node)) == nullptr || h->magic != kHandleMagic)
      return fail(abi::kInvalidUsage, "connect: the handle is not an rdmad plugin handle");
    if (node_ == h->node)
      return fail(abi::kInvalidUsage, "connect: the listening rank is on this node (" + node_ +
                                          "): rdmad flows join two nodes; ranks of one node use NCCL's P2P/SHM transports");
    if (connecting_.size() >= kMaxConnecting)
      return fail(abi::kInternalError, "connect: " + std::to_string(kMaxConnecting) + " connects in progress");
    uint64_t id = 0;
    while (id == 0 || connecting_.count(id) != 0) id = random_u64();
    auto fresh = std::make_unique<ConnectStage>();
    std::memcpy(fresh->identity, h, kHandleIdentityBytes);
    stage = fresh.get();
    connecting_.emplace(id, std::move(fresh));
    h->stage_id = id;
    if (!stage->rendezvous.start(*h, node_, &error)) return abort(abi::kSystemError, "connect: " + error);
  }
  if (!stage->comm) {
    switch (stage->rendezvous.step(&error)) {
      case Connecting::Step::kPending:
        return abi::kSuccess;
      case Connecting::Step::kFailed:
        return abort(abi::kSystemError, "connect to node " + std::string(h->node) + ": " + error);
      case Connecting::Step::kDone:
        break;
    }
    stage->comm = make_comm(true, dev, h->node, h->comm_id, stage->rendezvous.take_fd());
    Stream* s = nullptr;
    if (abi::Result r = open_stream(*stage->comm, 0, &s); r != abi::kSuccess) return abort(r, "connect: no flow");
  }
  if (!comm_ready(*stage->comm, &error)) {
    if (!error.empty()) return abort(abi::kSystemError, "connect: " + error);
    return abi::kSuccess;
  }
  *send_comm = stage->comm.release();
  drop_stage(h);
  return abi::kSuccess;
}

abi::Result Plugin::accept(void* listen_comm, void** recv_comm) {
  std::lock_guard lock(mu_);
  *recv_comm = nullptr;
  auto* l = static_cast<ListenComm*>(listen_comm);
  if (!l->connecting) {
    auto a = l->listener.poll();
    if (!a) return abi::kSuccess;
    l->connecting = make_comm(false, l->dev, a->node, l->comm_id, a->fd);
    Stream* s = nullptr;
    if (abi::Result r = open_stream(*l->connecting, 0, &s); r != abi::kSuccess) {
      close_streams(*l->connecting);
      l->connecting.reset();
      return r;
    }
  }
  std::string error;
  if (!comm_ready(*l->connecting, &error)) {
    if (error.empty()) return abi::kSuccess;
    close_streams(*l->connecting);
    l->connecting.reset();
    return fail(abi::kSystemError, "accept: " + error);
  }
  *recv_comm = l->connecting.release();
  return abi::kSuccess;
}

abi::Result Plugin::reg_mr(void* comm, void* data, size_t size, int type, void** mhandle) {
  return reg_mr_dmabuf(comm, data, size, type, 0, -1, mhandle);
}

abi::Result Plugin::reg_mr_dmabuf(void*, void* data, size_t size, int type, uint64_t offset, int fd, void** mhandle) {
  std::lock_guard lock(mu_);
  auto m = std::make_unique<MemHandle>();
  m->base = reinterpret_cast<uintptr_t>(data);
  m->size = size;
  m->type = type;
  if (type == abi::kPtrCuda && size > 0) {
    const uint64_t ptr = reinterpret_cast<uintptr_t>(data);
    rdmad_status s = fd >= 0 ? rdmad_register_dmabuf(client_, fd, offset, size, ptr, kAccess, 0, &m->mr)
                             : rdmad_register_gpu(client_, ptr, size, kAccess, 0, &m->mr);
    if (s != RDMAD_OK)
      return fail(s == RDMAD_ERR_CUDA ? abi::kUnhandledCudaError : abi::kSystemError,
                  "registering " + std::to_string(size) + " bytes of GPU memory: " + rdmad_last_error(client_));
  } else if (type == abi::kPtrHost && size > 0) {
    // Host memory the daemon can map as it is (host_memfd.h) moves without a staging copy; a
    // registration the daemon refuses (its quota, say) leaves it staged, as other host memory.
    if (auto f = find_memfd(data, size)) {
      if (rdmad_register_host(client_, f->fd, f->offset, size, kAccess, 0, &m->mr) != RDMAD_OK) {
        log(abi::kLogInfo, "registering %zu bytes of memfd-backed host memory: %s; it is staged", size,
            rdmad_last_error(client_));
        m->mr = nullptr;
      }
      ::close(f->fd);
    }
  } else if (type != abi::kPtrHost && type != abi::kPtrCuda) {
    return fail(abi::kInternalError, "regMr: unknown memory type " + std::to_string(type));
  }
  *mhandle = m.release();
  return abi::kSuccess;
}

abi::Result Plugin::dereg_mr(void*, void* mhandle) {
  std::lock_guard lock(mu_);
  auto* m = static_cast<MemHandle*>(mhandle);
  if (m == nullptr) return abi::kSuccess;
  abi::Result r = abi::kSuccess;
  if (m->mr != nullptr && rdmad_deregister(client_, m->mr) != RDMAD_OK)
    r = fail(abi::kSystemError, std::string("deregMr: ") + rdmad_last_error(client_));
  delete m;
  return r;
}

void Plugin::close_streams(Comm& c) {
  for (auto& [tag, s] : c.streams) rdmad_flow_close(s->flow);
  c.streams.clear();
  // A request still in the daemon may have its staging buffer in a peer's hands: not reused.
  for (auto& r : c.requests) {
    for (int i = 0; i < r->n; ++i) {
      Sub& s = r->subs[static_cast<size_t>(i)];
      if (s.staging == nullptr) continue;
      if (s.complete) staging_->release(s.staging);
      else staging_->discard(s.staging);
      s.staging = nullptr;
    }
  }
  c.requests.clear();
  if (c.socket >= 0) ::close(c.socket);
  c.socket = -1;
}

abi::Result Plugin::close_comm(void* comm) {
  std::lock_guard lock(mu_);
  auto* c = static_cast<Comm*>(comm);
  if (c == nullptr) return abi::kSuccess;
  log(abi::kLogInfo, "%s: comm with node %s: %llu messages, %llu bytes, %llu bytes of them staged (copied)",
      c->send ? "closeSend" : "closeRecv", c->peer.c_str(), static_cast<unsigned long long>(c->messages),
      static_cast<unsigned long long>(c->bytes), static_cast<unsigned long long>(c->staged_bytes));
  close_streams(*c);
  delete c;
  return abi::kSuccess;
}

abi::Result Plugin::close_listen(void* listen_comm) {
  std::lock_guard lock(mu_);
  auto* l = static_cast<ListenComm*>(listen_comm);
  if (l == nullptr) return abi::kSuccess;
  if (l->connecting) close_streams(*l->connecting);
  delete l;
  return abi::kSuccess;
}

abi::Result Plugin::make_vdevice(int* dev, abi::VDeviceProps* props) {
  std::lock_guard lock(mu_);
  if (props == nullptr || props->ndevs < 1 || props->ndevs > abi::kMaxDevsPerNic) return abi::kInvalidUsage;
  if (devices_.size() >= kMaxDevices) return fail(abi::kInternalError, "makeVDevice: too many devices");
  Device v;
  v.ptr_support = ~0;
  v.name = "rdmad-merged";
  bool every_nic = false;  // a member that is the node device already spans every NIC
  for (int i = 0; i < props->ndevs; ++i) {
    const int m = props->devs[i];
    if (m < 0 || static_cast<size_t>(m) >= devices_.size()) return abi::kInvalidArgument;
    const Device& d = devices_[static_cast<size_t>(m)];
    every_nic |= d.nic_mask == 0;
    v.members.push_back(m);
    v.nic_mask |= d.nic_mask;
    v.speed_mbps += d.speed_mbps;
    v.ptr_support &= d.ptr_support;
    v.guid ^= d.guid;
    v.name += "+" + d.name;
  }
  if (every_nic) v.nic_mask = 0;
  devices_.push_back(v);
  *dev = static_cast<int>(devices_.size() - 1);
  return abi::kSuccess;
}

}  // namespace rdmad::nccl
