#pragma once
// Helpers for the backend-parameterised verbs tests: open a device by backend name (skipping with a
// reason when the backend or its hardware is absent), connect two RC queue pairs, run work requests
// to completion with a deadline.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "rdmad/verbs/registry.h"
// Binaries that link the rdma_core backend (and so see its headers) also run its instances.
#if __has_include("rdmad/verbs/rdma_core/rdma_core_backend.h")
#include "rdmad/nic_cc/port_counters.h"
#include "rdmad/verbs/rdma_core/rdma_core_backend.h"
#define RDMAD_TEST_HAVE_RDMA_CORE 1
#endif
#include "rdmad/verbs/soft/soft_backend.h"
// Binaries that link the dpdk backend (built where DPDK is) also run its instances.
#if __has_include("rdmad/verbs/dpdk/dpdk_backend.h")
#include "dpdk_test_util.h"
#include "rdmad/verbs/dpdk/dpdk_backend.h"
#define RDMAD_TEST_HAVE_DPDK 1
#endif

namespace rdmad::verbs::test {

inline BackendRegistry& registry() {
  static BackendRegistry r = [] {
    BackendRegistry reg;
    soft::register_backend(reg);
#ifdef RDMAD_TEST_HAVE_RDMA_CORE
    rdma_core::register_backend(reg);
#endif
#ifdef RDMAD_TEST_HAVE_DPDK
    dpdk::register_backend(reg);
#endif
    return reg;
  }();
  return r;
}

inline DeviceConfig soft_config(const std::string& address = "127.0.0.1") {
  DeviceConfig c;
  c.address = address;
  c.backend_options["udp_port"] = 0;  // ephemeral: tests run in parallel
  c.backend_options["cc_enabled"] = false;
  return c;
}

/// One endpoint: device, PD, CQs, a QP.
struct Endpoint {
  std::unique_ptr<Device> dev;
  std::unique_ptr<ProtectionDomain> pd;
  std::unique_ptr<CompletionQueue> scq;
  std::unique_ptr<CompletionQueue> rcq;
  std::unique_ptr<QueuePair> qp;

  ~Endpoint() { reset(); }
  void reset() {  // QP → CQ → PD → device
    qp.reset();
    scq.reset();
    rcq.reset();
    pd.reset();
    dev.reset();
  }
};

/// Opens a device with the named backend; empty with *skip_reason set when it cannot be tested here.
/// "dpdk" and "dpdk_af_packet" are instances of the dpdk backend: dpdk_test_util.h joins a test's
/// devices two by two with net_memif or net_af_packet, and gives each pair addresses of its own.
inline std::unique_ptr<Device> open_device(const std::string& instance, const DeviceConfig& config,
                                           std::string* skip_reason) {
  const std::string backend = instance == "dpdk_af_packet" ? "dpdk" : instance;
  const BackendInfo* b = registry().find(backend);
  if (b == nullptr) {
    *skip_reason = "backend '" + backend + "' is not built into this binary";
    return nullptr;
  }
  // A backend that opens an existing device skips where the host has none.
  if (b->caps.opens_named_device && b->list_devices().empty()) {
    // The backend's own reason ("no RDMA device: ibv_get_device_list found 0 devices").
    *skip_reason = b->open(DeviceConfig{}).status().message();
    return nullptr;
  }
  // The configs here serve every backend: an option this backend's table lacks (a soft one, for
  // rdma_core) is dropped, as the daemon gives each backend only its own.
  DeviceConfig own = config;
#ifdef RDMAD_TEST_HAVE_DPDK
  if (is_dpdk_instance(instance)) {
    auto c = dpdk_test_config(instance, config, skip_reason);
    if (!c) return nullptr;
    own = *c;
  }
#endif
  std::erase_if(own.backend_options, [&](const auto& o) {
    for (const OptionSpec& spec : b->options)
      if (spec.name == o.first) return false;
    return true;
  });
  auto r = b->open(own);
  if (!r.ok()) {
    *skip_reason = "cannot open a " + instance + " device: " + r.status().message();
    return nullptr;
  }
#ifdef RDMAD_TEST_HAVE_DPDK
  // Tests send at once: the second of a pair waits until both ends see the link (a memif client
  // connects after it opened, and its server learns so later still).
  if (is_dpdk_instance(instance)) {
    DpdkTestLinks& l = dpdk_links();
    if (l.opened % 2 == 1) {
      l.first = r.value().get();
    } else if (!wait_link_up(*r.value()) || (l.first != nullptr && !wait_link_up(*l.first))) {
      ADD_FAILURE() << instance << " link of " << own.address << " not up within 5 s";
    }
  }
#endif
  return std::move(r.value());
}

// Leaves `e` empty when `dev` is null (open_device skipped): callers test e.dev and skip.
inline void make_endpoint(Endpoint& e, std::unique_ptr<Device> dev, uint32_t depth = 256) {
  e.dev = std::move(dev);
  if (!e.dev) return;
  e.pd = std::move(e.dev->alloc_pd().value());
  e.scq = std::move(e.dev->create_cq(4 * depth).value());
  e.rcq = std::move(e.dev->create_cq(4 * depth).value());
  QpInitAttr ia;
  ia.max_send_wr = depth;
  ia.max_recv_wr = depth;
  ia.send_cq = e.scq.get();
  ia.recv_cq = e.rcq.get();
  auto qp = e.pd->create_qp(ia);
  ASSERT_TRUE(qp.ok()) << qp.status().message();
  e.qp = std::move(qp.value());
}

struct ConnectOptions {
  uint32_t mtu = 1024;
  uint8_t timeout = 12;  // 16.8 ms
  uint8_t retry_cnt = 7;
  uint8_t rnr_retry = 7;
  uint8_t min_rnr_timer = 1;  // 10 µs
  uint32_t access = kAccessRemoteWrite | kAccessRemoteRead;
  uint32_t sq_psn = 0x123456;
  uint32_t rq_psn = 0xFFFFF0;  // near the 24-bit wrap
  uint16_t via_port = 0;       // send to this local UDP port instead of the peer's (fabric emulator)
  uint8_t max_rd_atomic = 16;  // READ requests in flight as requester
};

/// Takes `local` through RESET→INIT→RTR→RTS towards `remote`.
inline Status connect_qp(QueuePair& local, const PortInfo& remote_port, uint32_t remote_qpn, uint32_t sq_psn,
                         uint32_t rq_psn, const ConnectOptions& o) {
  QpAttr a;
  a.state = QpState::kInit;
  a.access_flags = o.access;
  Status st = local.modify(a, kQpState | kQpAccessFlags);
  if (!st.ok()) return st;
  a.state = QpState::kRtr;
  a.path_mtu_bytes = o.mtu;
  a.dest_qp_num = remote_qpn;
  a.rq_psn = rq_psn;
  a.dest_gid = remote_port.gid;
  a.dest_lid = remote_port.lid;  // InfiniBand ports route by LID; RoCE ignores it
  a.dest_udp_port = o.via_port ? o.via_port : remote_port.udp_port;
  a.min_rnr_timer = o.min_rnr_timer;
  a.max_dest_rd_atomic = 16;
  st = local.modify(a, kQpState | kQpPathMtu | kQpDestQpn | kQpRqPsn | kQpAv | kQpMinRnrTimer |
                           kQpMaxDestRdAtomic);
  if (!st.ok()) return st;
  a.state = QpState::kRts;
  a.sq_psn = sq_psn;
  a.timeout = o.timeout;
  a.retry_cnt = o.retry_cnt;
  a.rnr_retry = o.rnr_retry;
  a.max_rd_atomic = o.max_rd_atomic;
  return local.modify(a, kQpState | kQpSqPsn | kQpTimeout | kQpRetryCnt | kQpRnrRetry | kQpMaxRdAtomic);
}

/// Connects a's QP with b's QP both ways.
inline void connect_pair(Endpoint& a, Endpoint& b, const ConnectOptions& o = {}) {
  auto pa = a.dev->query_port(1).value();
  auto pb = b.dev->query_port(1).value();
  const Status sa = connect_qp(*a.qp, pb, b.qp->qp_num(), o.sq_psn, o.rq_psn, o);
  ASSERT_TRUE(sa.ok()) << sa.message();
  const Status sb = connect_qp(*b.qp, pa, a.qp->qp_num(), o.rq_psn, o.sq_psn, o);
  ASSERT_TRUE(sb.ok()) << sb.message();
}

/// Polls until n completions arrived or the deadline passed.
inline std::vector<WorkCompletion> wait_completions(CompletionQueue& cq, size_t n,
                                                    std::chrono::milliseconds timeout =
                                                        std::chrono::milliseconds(20000)) {
  std::vector<WorkCompletion> out;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  WorkCompletion wc[64];
  while (out.size() < n && std::chrono::steady_clock::now() < deadline) {
    size_t k = cq.poll(wc);
    out.insert(out.end(), wc, wc + k);
    if (k == 0) std::this_thread::yield();
  }
  return out;
}

/// True for an rdma_core device on rxe (Soft-RoCE). Tests key rxe's documented deviations from the
/// IB spec and from hardware on it (docs/verbs.md, "rxe findings"), never loosening a check for
/// every backend.
inline bool is_rxe(const Device& dev) {
#ifdef RDMAD_TEST_HAVE_RDMA_CORE
  return rdma_core::vendor_id(dev) == rdma_core::kRxeVendorId;
#else
  (void)dev;
  return false;
#endif
}

/// One of the device's own hw_counters by its driver's name (rdma_core devices; 0 when absent), for
/// what NicCounters has no field for.
inline uint64_t driver_counter(const Device& dev, std::string_view name) {
#ifdef RDMAD_TEST_HAVE_RDMA_CORE
  const auto loc = rdma_core::nic_location(dev);
  if (!loc) return 0;
  const auto hw = nic_cc::read_hw_counters(nic_cc::SysfsRoot(loc->sysfs_root), loc->device, loc->port);
  return hw ? hw->get(name).value_or(0) : 0;
#else
  (void)dev;
  (void)name;
  return 0;
#endif
}

/// Reads a counter with `read()` until it reaches `at_least` or `timeout` passes; returns the last
/// value. A NIC's counters come from sysfs, which caches them for hw_counters/lifespan (about 10
/// ms): a read just after the completion may not show the events before it yet. Counters only
/// grow, so the first fresh read is final.
template <class Read>
uint64_t counter_reaching(Read read, uint64_t at_least,
                          std::chrono::milliseconds timeout = std::chrono::milliseconds(2000)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  uint64_t v = read();
  while (v < at_least && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::yield();
    v = read();
  }
  return v;
}

/// Deterministic non-trivial fill so misplaced bytes show.
inline void fill_pattern(std::vector<uint8_t>& v, uint32_t seed) {
  uint32_t x = seed * 2654435761u + 1;
  for (auto& b : v) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    b = static_cast<uint8_t>(x);
  }
}

}  // namespace rdmad::verbs::test
