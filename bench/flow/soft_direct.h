// The baseline of the flow benchmark: the soft (or dpdk) backend used directly in one process (two
// devices — soft on loopback, dpdk joined by a net_memif link — one RC QP each, or k, QP j of one
// connected to QP j of the other), no daemon and no ring.
#pragma once

#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "rdmad/base/assert.h"
#include "rdmad/verbs/registry.h"

namespace rdmad::bench {

class SoftDirect {
 public:
  // `bytes` of source on device a, `bytes` of destination on device b, `qps` QP pairs; `options`:
  // backend options beyond the daemon's defaults (e.g. {"source_ports", 0}); `backend`: "soft" or
  // "dpdk".
  explicit SoftDirect(size_t bytes, size_t qps = 1, const std::map<std::string, int64_t>& options = {},
                      const std::string& backend = "soft")
      : src_(bytes), dst_(bytes) {
    verbs::register_builtin_backends(reg_);
    open(a_, qps, options, backend, 0);
    open(b_, qps, options, backend, 1);
    // A memif client connects after it opened, and its server learns so later still.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    for (Ep* e : {&a_, &b_})
      while (e->dev->query_port(1).value().state != verbs::PortState::kActive) {
        if (std::chrono::steady_clock::now() > deadline) throw std::runtime_error(backend + " link not up in 10 s");
        std::this_thread::yield();
      }
    for (size_t j = 0; j < qps; ++j) {
      connect(*a_.qps[j], *b_.qps[j], *b_.dev);
      connect(*b_.qps[j], *a_.qps[j], *a_.dev);
    }
    smr_ = std::move(a_.pd->reg_mr(src_.data(), bytes, 0).value());
    dmr_ = std::move(
        b_.pd->reg_mr(dst_.data(), bytes, verbs::kAccessLocalWrite | verbs::kAccessRemoteWrite).value());
  }
  ~SoftDirect() {
    smr_.reset();
    dmr_.reset();
    for (Ep* e : {&a_, &b_}) {
      e->qps.clear();
      e->cq.reset();
      e->pd.reset();
      e->dev.reset();
    }
    if (!memif_socket_.empty()) ::unlink(memif_socket_.c_str());
  }
  SoftDirect(const SoftDirect&) = delete;
  SoftDirect& operator=(const SoftDirect&) = delete;

  uint8_t* src() { return src_.data(); }
  uint8_t* dst() { return dst_.data(); }

  size_t qp_count() const { return a_.qps.size(); }

  // Posts a WRITE of [offset, offset+length) of the source to the same offset of the destination,
  // on QP pair `qp`.
  void post_write(uint64_t wr_id, size_t offset, size_t length, size_t qp = 0) {
    verbs::SendWr w;
    w.wr_id = wr_id;
    w.opcode = verbs::WrOpcode::kRdmaWrite;
    w.sge = {reinterpret_cast<uint64_t>(src_.data() + offset), static_cast<uint32_t>(length), smr_->lkey()};
    w.remote_addr = reinterpret_cast<uint64_t>(dst_.data() + offset);
    w.rkey = dmr_->rkey();
    if (!a_.qps[qp]->post_send({&w, 1}).ok()) throw std::runtime_error("soft post_send failed");
  }
  // Completions of the sender (non-blocking); throws on an unsuccessful one.
  size_t poll() {
    verbs::WorkCompletion wc[16];
    const size_t n = a_.cq->poll(wc);
    for (size_t i = 0; i < n; ++i)
      if (wc[i].status != verbs::WcStatus::kSuccess) throw std::runtime_error("soft WRITE failed");
    return n;
  }

 private:
  struct Ep {
    std::unique_ptr<verbs::Device> dev;
    std::unique_ptr<verbs::ProtectionDomain> pd;
    std::unique_ptr<verbs::CompletionQueue> cq;
    std::vector<std::unique_ptr<verbs::QueuePair>> qps;
  };

  void open(Ep& e, size_t qps, const std::map<std::string, int64_t>& options, const std::string& backend, int side) {
    verbs::DeviceConfig c;  // the daemon's NIC settings: DCQCN on, no busy polling
    if (backend == "dpdk") {
      // Every pair its own memif link (DPDK keeps a port's name for the process).
      static int pairs = 0;
      const int pair = side == 0 ? pairs++ : pairs - 1;
      c.address = fmt::format("10.77.0.{}", side + 1);
      const std::string socket = fmt::format("/tmp/rdmad-flowbench-{}-{}.sock", ::getpid(), pair);
      if (side == 0) memif_socket_ = socket;
      c.backend_options["devargs"] = fmt::format("net_memif_direct{}_{},role={},socket={},socket-abstract=no", pair,
                                                 side, side == 0 ? "server" : "client", socket);
      c.backend_options["mtu"] = 9000;
    } else {
      c.address = "127.0.0.1";
      c.backend_options["udp_port"] = 0;
    }
    for (const auto& [key, value] : options) c.backend_options[key] = value;
    auto dev = reg_.open(backend, c);
    if (!dev.ok()) throw std::runtime_error("cannot open a " + backend + " device: " + dev.status().message());
    e.dev = std::move(dev.value());
    e.pd = std::move(e.dev->alloc_pd().value());
    e.cq = std::move(e.dev->create_cq(4096).value());
    verbs::QpInitAttr ia;
    ia.max_send_wr = 256;
    ia.send_cq = ia.recv_cq = e.cq.get();
    for (size_t j = 0; j < qps; ++j) e.qps.push_back(std::move(e.pd->create_qp(ia).value()));
  }

  // Takes x to RTS towards y (a QP of device `y_dev`).
  static void connect(verbs::QueuePair& x, const verbs::QueuePair& y, verbs::Device& y_dev) {
    const verbs::PortInfo p = y_dev.query_port(1).value();
    verbs::QpAttr at;
    at.state = verbs::QpState::kInit;
    at.access_flags = verbs::kAccessRemoteWrite;
    RDMAD_ASSERT(x.modify(at, verbs::kQpState | verbs::kQpAccessFlags).ok(), "modify failed");
    at.state = verbs::QpState::kRtr;
    at.path_mtu_bytes = 4096;
    at.dest_qp_num = y.qp_num();
    at.rq_psn = 0;
    at.dest_gid = p.gid;
    at.dest_udp_port = p.udp_port;
    RDMAD_ASSERT(x.modify(at,
                 verbs::kQpState | verbs::kQpPathMtu | verbs::kQpDestQpn | verbs::kQpRqPsn | verbs::kQpAv).ok(), "modify failed");
    at.state = verbs::QpState::kRts;
    at.sq_psn = 0;
    at.timeout = 14;
    RDMAD_ASSERT(x.modify(at, verbs::kQpState | verbs::kQpSqPsn | verbs::kQpTimeout).ok(), "modify failed");
  }

  verbs::BackendRegistry reg_;
  std::string memif_socket_;
  Ep a_, b_;
  std::vector<uint8_t> src_, dst_;
  std::unique_ptr<verbs::MemoryRegion> smr_, dmr_;
};

}  // namespace rdmad::bench
