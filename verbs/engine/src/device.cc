// The application-facing objects of an engine NIC. They hold the NIC alive (shared_ptr) and reach
// a QP's datapath thread through Datapath::run for control operations other than memory
// registration (which fills the NIC's lock-free region table from the caller's thread); polling
// touches only the SPSC rings, posting also computes payload CRCs (Nic::crc_at_post) after
// checking the region.
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <optional>
#include <stdexcept>

#include "datapath.h"
#include "rdmad/verbs/engine/engine.h"

namespace rdmad::verbs::engine {
namespace {

constexpr uint32_t kMaxWr = 16384;
constexpr uint32_t kMaxCqDepth = 1u << 20;

class SoftMr final : public MemoryRegion {
 public:
  SoftMr(std::shared_ptr<Nic> nic, uint64_t addr, size_t len, uint32_t key, uint32_t access)
      : nic_(std::move(nic)), addr_(addr), len_(len), key_(key), access_(access) {}
  // The caller may unmap the memory once this returns (remove_mr waits for what still reads it).
  ~SoftMr() override { nic_->remove_mr(key_); }
  uint64_t addr() const override { return addr_; }
  size_t length() const override { return len_; }
  uint32_t lkey() const override { return key_; }
  uint32_t rkey() const override { return key_; }
  uint32_t access() const override { return access_; }

 private:
  std::shared_ptr<Nic> nic_;
  uint64_t addr_;
  size_t len_;
  uint32_t key_;
  uint32_t access_;
};

class SoftCq final : public CompletionQueue {
 public:
  SoftCq(std::shared_ptr<Nic> nic, uint32_t depth)
      : nic_(std::move(nic)), shared_(std::make_shared<CqShared>(depth, nic_->id(), nic_->datapath_count())) {}
  size_t poll(std::span<WorkCompletion> out) override {
    return shared_->pop(out);
  }
  // Each datapath thread's ring holds this many (a CQ shared by QPs of several threads holds more).
  uint32_t depth() const override { return static_cast<uint32_t>(shared_->rings[0]->capacity()); }
  int notify_fd() const override { return shared_->event_fd; }
  Status request_notify() override {
    if (shared_->event_fd < 0) return Status::not_supported("completion notification: eventfd failed");
    shared_->armed.store(true, std::memory_order_seq_cst);  // before the caller's next poll()
    return Status::success();
  }
  void ack_notify() override {
    uint64_t v;
    (void)!::read(shared_->event_fd, &v, sizeof v);
  }
  const std::shared_ptr<CqShared>& shared() const { return shared_; }

 private:
  std::shared_ptr<Nic> nic_;
  std::shared_ptr<CqShared> shared_;
};

class SoftQp final : public QueuePair {
 public:
  SoftQp(std::shared_ptr<Nic> nic, std::shared_ptr<QpShared> shared, uint32_t qpn)
      : nic_(std::move(nic)),
        shared_(std::move(shared)),
        qpn_(qpn),
        datapath_(nic_->datapath_of(qpn)),
        slot_(nic_->slot_of(qpn)) {}
  ~SoftQp() override {
    datapath_.run([&] { datapath_.remove_qp(qpn_); });
    nic_->release_qpn(qpn_);
  }
  uint32_t qp_num() const override { return qpn_; }
  Status modify(const QpAttr& attr, uint32_t mask) override {
    Status st;
    datapath_.run([&] { st = datapath_.modify_qp(qpn_, attr, mask); });
    return st;
  }
  QpAttr query() const override {
    QpAttr a;
    datapath_.run([&] { a = datapath_.query_qp(qpn_); });
    a.cap.max_send_wr = static_cast<uint32_t>(shared_->sq.capacity());
    a.cap.max_recv_wr = static_cast<uint32_t>(shared_->rq.capacity());
    return a;
  }
  Status post_send(std::span<const SendWr> wrs, size_t* posted) override {
    QpState s = shared_->state.load(std::memory_order_acquire);
    if (s != QpState::kRts && s != QpState::kError) {
      if (posted) *posted = 0;
      return Status::error("post_send: qp not in RTS");
    }
    size_t n = 0;
    auto& sq = shared_->sq;
    // One producer per queue: a slot seen free stays free until the push below.
    while (n < wrs.size() && sq.free_slots() > 0) {
      PostCrc& pc = shared_->post_crc[sq.slot(sq.producer_tail())];
      if (s == QpState::kRts) {
        nic_->crc_at_post(*shared_, wrs[n], &pc);
      } else {
        pc = PostCrc{};  // in ERR the WR is only flushed
      }
      sq.push(wrs[n]);
      ++n;
    }
    return finish_post(n, wrs.size(), posted);
  }
  Status post_recv(std::span<const RecvWr> wrs, size_t* posted) override {
    if (shared_->state.load(std::memory_order_acquire) == QpState::kReset) {
      if (posted) *posted = 0;
      return Status::error("post_recv: qp in RESET");
    }
    size_t n = 0;
    while (n < wrs.size() && shared_->rq.push(wrs[n])) ++n;
    return finish_post(n, wrs.size(), posted);
  }

 private:
  Status finish_post(size_t n, size_t wanted, size_t* posted) {
    if (posted) *posted = n;
    if (n > 0) datapath_.doorbell_slot(slot_);
    return n == wanted ? Status::success() : Status(StatusCode::kNoResource, {});
  }

  std::shared_ptr<Nic> nic_;
  std::shared_ptr<QpShared> shared_;
  uint32_t qpn_;
  Datapath& datapath_;  // the thread that owns the QP
  uint32_t slot_;
};

class SoftPd final : public ProtectionDomain {
 public:
  SoftPd(std::shared_ptr<Nic> nic, uint32_t id) : nic_(std::move(nic)), id_(id) {}
  Result<std::unique_ptr<MemoryRegion>> reg_mr(void* addr, size_t length, uint32_t access) override {
    if (addr == nullptr && length != 0) return Status::error("reg_mr: null address");
    uint32_t key = 0;
    // On this thread: the datapath is neither woken nor waited for (it reads the table lock-free).
    Status st = nic_->add_mr(addr, length, access, id_, &key);
    if (!st.ok()) return st;
    return std::unique_ptr<MemoryRegion>(
        std::make_unique<SoftMr>(nic_, reinterpret_cast<uint64_t>(addr), length, key, access));
  }
  Result<std::unique_ptr<MemoryRegion>> reg_dmabuf_mr(int, uint64_t, size_t, uint64_t, uint32_t) override {
    return Status::not_supported(
        "engine nic: dma-buf memory cannot be reached by a user-space datapath (soft, dpdk backends)");
  }
  Result<std::unique_ptr<QueuePair>> create_qp(const QpInitAttr& attr) override {
    auto* scq = dynamic_cast<SoftCq*>(attr.send_cq);
    auto* rcq = dynamic_cast<SoftCq*>(attr.recv_cq);
    if (scq == nullptr || rcq == nullptr) return Status::error("create_qp: send_cq and recv_cq are required");
    if (scq->shared()->nic_id != nic_->id() || rcq->shared()->nic_id != nic_->id()) {
      return Status::error("create_qp: completion queue belongs to another device");
    }
    if (attr.max_send_wr == 0 || attr.max_send_wr > kMaxWr || attr.max_recv_wr > kMaxWr) {
      return Status::error("create_qp: max_send_wr/max_recv_wr out of range");
    }
    auto shared = std::make_shared<QpShared>(attr.max_send_wr, std::max<uint32_t>(attr.max_recv_wr, 1));
    const Result<uint32_t> qpn = nic_->reserve_qpn();
    if (!qpn.ok()) return qpn.status();
    Datapath& dp = nic_->datapath_of(*qpn);
    Result<QpContext*> ctx = Status::error("unreached");
    dp.run([&] { ctx = dp.add_qp(nic_->numbering().index(*qpn), *qpn, id_, shared, scq->shared(), rcq->shared()); });
    if (!ctx.ok()) {
      nic_->release_qpn(*qpn);
      return ctx.status();
    }
    return std::unique_ptr<QueuePair>(std::make_unique<SoftQp>(nic_, shared, *qpn));
  }

 private:
  std::shared_ptr<Nic> nic_;
  uint32_t id_;
};

class EngineDevice final : public Device {
 public:
  EngineDevice(const EngineConfig& config, const PortFactory& make_port)
      : nic_(std::make_shared<Nic>(config, make_port)), active_mtu_(nic_->port().link_mtu()) {
    info_.name = config.name.empty() ? config.backend + std::to_string(nic_->id()) : config.name;
    info_.backend = config.backend;
    const roce::IpAddr& ip = nic_->port().local_ip();
    if (ip.v6) {
      gid_.raw = ip.bytes;
    } else {  // ::ffff:a.b.c.d
      gid_.raw = {};
      gid_.raw[10] = gid_.raw[11] = 0xFF;
      std::memcpy(gid_.raw.data() + 12, ip.bytes.data(), 4);
    }
  }
  const DeviceInfo& info() const override { return info_; }
  Result<PortInfo> query_port(uint8_t port_num) const override {
    if (port_num != 1) return Status::error(info_.backend + " device has one port");
    PortInfo p;
    p.state = nic_->port().link_up() ? PortState::kActive : PortState::kDown;
    p.speed_mbps = nic_->config().line_rate_mbps;
    p.gid = gid_;
    p.udp_port = nic_->port().udp_port();
    p.active_mtu_bytes = active_mtu_;
    return p;
  }
  Result<std::unique_ptr<ProtectionDomain>> alloc_pd() override {
    return std::unique_ptr<ProtectionDomain>(std::make_unique<SoftPd>(nic_, next_pd_++));
  }
  Result<std::unique_ptr<CompletionQueue>> create_cq(uint32_t depth) override {
    if (depth == 0 || depth > kMaxCqDepth) return Status::error("create_cq: depth out of range");
    return std::unique_ptr<CompletionQueue>(std::make_unique<SoftCq>(nic_, depth));
  }
  const base::Heartbeat* datapath_heartbeat() const override { return &nic_->datapath(0).heartbeat(); }
  std::vector<const base::Heartbeat*> datapath_heartbeats() const override { return nic_->heartbeats(); }
  Status run_on_datapath_for_test(const std::function<void()>& fn) override {
    nic_->datapath(0).run(fn);
    return Status::success();
  }
  Status run_on_datapath_thread_for_test(size_t i, const std::function<void()>& fn) override {
    if (i >= nic_->datapath_count()) return Status::not_supported("no such datapath thread");
    nic_->datapath(static_cast<uint32_t>(i)).run(fn);
    return Status::success();
  }
  // Read beside the datapaths, never through them: a scrape does not wait for a busy or stalled NIC.
  NicCounters counters() const override { return nic_->counters(); }
  std::vector<DcqcnSample> dcqcn_samples() const override {
    std::vector<DcqcnSample> out;
    nic_->run_all([&](Datapath& d) { d.dcqcn_samples(out); });
    return out;
  }
  std::optional<cc::DcqcnParams> dcqcn_params() const override { return nic_->dcqcn_params(); }
  Status set_dcqcn_params(const cc::DcqcnParams& params) override {
    nic_->set_dcqcn_params(params);
    return Status::success();
  }
  PassStats pass_stats() const {
    PassStats s;
    nic_->run_all([&](Datapath& d) {
      const PassStats one = d.pass_stats();
      s.passes += one.passes;
      s.qps_visited += one.qps_visited;
      s.timers_scheduled += one.timers_scheduled;
    });
    return s;
  }

 private:
  std::shared_ptr<Nic> nic_;
  uint32_t active_mtu_ = 4096;
  Gid gid_;
  DeviceInfo info_;
  std::atomic<uint32_t> next_pd_{1};
};

}  // namespace

PassStats pass_stats_for_test(const Device& dev) { return dynamic_cast<const EngineDevice&>(dev).pass_stats(); }

Capabilities engine_capabilities() {
  Capabilities c;
  c.dmabuf_mr = false;
  c.software_cc = true;
  c.ipv6 = true;
  c.max_mr_size = uint64_t{1} << 40;
  c.max_mr = kMaxMrs - 1;  // entry 0 is never used
  c.max_qp = kMaxQpsLimit;
  c.max_qp_wr = kMaxWr;
  c.max_cq_depth = kMaxCqDepth;
  c.max_msg_size = 1u << 31;
  // A user-space NIC: registration only records the range (the datapath reads and writes it through
  // the daemon's mapping); the NIC is made by open(), bound to its address, and exists nowhere else.
  c.registration_faults_in_pages = false;
  c.sysfs_ports = false;
  c.opens_named_device = false;
  c.needs_address = true;
  c.address_selects_gid = false;
  c.retries_failed_open = false;
  return c;
}

Result<std::unique_ptr<Device>> open_device(const EngineConfig& config, const PortFactory& make_port) {
  try {
    return std::unique_ptr<Device>(std::make_unique<EngineDevice>(config, make_port));
  } catch (const std::exception& e) {
    return Status::error(e.what());
  }
}

}  // namespace rdmad::verbs::engine
