#pragma once
// Soft NICs for the peer session tests: one node's NICs on 127.0.0.1 (ephemeral UDP ports) with a
// PD and CQs each, and a helper that writes over every QP of a connector and checks the bytes.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <thread>
#include <vector>

#include "peer_test_util.h"
#include "rdmad/daemon/peer/peer_session.h"
#include "rdmad/verbs/soft/soft_backend.h"
#include "unit/verbs/verbs_test_util.h"

namespace rdmad::peer::test {

inline constexpr size_t kNics = 2;
inline constexpr uint32_t kQpsPerNic = 2;
inline constexpr size_t kSlice = 1 << 20;
inline constexpr size_t kGuard = 64;

// One node's NICs: soft devices on 127.0.0.1 with ephemeral UDP ports, a PD and CQs each.
struct Node {
  struct NicObjects {
    std::unique_ptr<verbs::Device> dev;
    std::unique_ptr<verbs::ProtectionDomain> pd;
    std::unique_ptr<verbs::CompletionQueue> scq;
    std::unique_ptr<verbs::CompletionQueue> rcq;
  };
  std::vector<NicObjects> nics;

  explicit Node(const verbs::BackendRegistry& reg, size_t nic_count = kNics) {
    for (size_t i = 0; i < nic_count; ++i) {
      verbs::DeviceConfig dc;
      dc.name = "soft" + std::to_string(i);
      dc.address = "127.0.0.1";
      dc.backend_options["udp_port"] = 0;
      dc.backend_options["cc_enabled"] = false;
      NicObjects n;
      n.dev = std::move(reg.open("soft", dc).value());
      n.pd = std::move(n.dev->alloc_pd().value());
      n.scq = std::move(n.dev->create_cq(1024).value());
      n.rcq = std::move(n.dev->create_cq(1024).value());
      nics.push_back(std::move(n));
    }
  }
  ~Node() {  // CQ → PD → device
    for (auto& n : nics) {
      n.scq.reset();
      n.rcq.reset();
      n.pd.reset();
      n.dev.reset();
    }
  }
  std::vector<LocalNic> local_nics() {
    std::vector<LocalNic> local;
    for (auto& n : nics) {
      LocalNic l;
      l.name = n.dev->info().name;
      l.device = n.dev.get();
      l.pd = n.pd.get();
      l.send_cq = n.scq.get();
      l.recv_cq = n.rcq.get();
      local.push_back(l);
    }
    return local;
  }
  PeerSession::ConnectorFactory factory(uint32_t qps_per_nic = kQpsPerNic) {
    return [this, qps_per_nic](const std::string&) {
      std::vector<LocalNic> local = local_nics();
      QpConnectorOptions o;
      o.qps_per_nic = qps_per_nic;
      o.timeout = 12;
      return std::make_unique<QpConnector>(std::move(local), o);
    };
  }
};

// Writes slice k of src into dst over every QP of `qps` (slice k on the k-th QP) and waits for
// every completion. dst_mrs[i] is dst registered on the peer's NIC i.
inline void write_everything(boost::asio::io_context& io, Node& node, QpConnector& qps, std::vector<uint8_t>& src,
                      const std::vector<std::unique_ptr<verbs::MemoryRegion>>& src_mrs, std::vector<uint8_t>& dst,
                      const std::vector<std::unique_ptr<verbs::MemoryRegion>>& dst_mrs) {
  ASSERT_EQ(qps.qps().size(), kNics * kQpsPerNic);
  size_t k = 0;
  for (const QpConnector::Qp& q : qps.qps()) {
    ASSERT_TRUE(q.connected);
    verbs::SendWr w;
    w.wr_id = k;
    w.opcode = verbs::WrOpcode::kRdmaWrite;
    w.sge = {reinterpret_cast<uint64_t>(src.data() + k * kSlice), kSlice, src_mrs[q.nic_index]->lkey()};
    w.remote_addr = reinterpret_cast<uint64_t>(dst.data() + k * kSlice);
    w.rkey = dst_mrs[q.remote.nic_index]->rkey();
    ASSERT_TRUE(q.qp->post_send({&w, 1}).ok());
    ++k;
  }
  std::vector<bool> done(k, false);
  size_t got = 0;
  const bool ok = run_until(io, [&] {
    for (auto& n : node.nics) {
      verbs::WorkCompletion wc[16];
      const size_t m = n.scq->poll(wc);
      for (size_t i = 0; i < m; ++i) {
        EXPECT_EQ(wc[i].status, verbs::WcStatus::kSuccess) << verbs::to_string(wc[i].status);
        EXPECT_LT(wc[i].wr_id, k);
        EXPECT_FALSE(done[wc[i].wr_id]) << "completed twice";
        done[wc[i].wr_id] = true;
        ++got;
      }
    }
    if (got < k) std::this_thread::yield();
    return got >= k;
  }, std::chrono::milliseconds(30000));
  ASSERT_TRUE(ok) << got << " of " << k << " writes completed";
  ASSERT_TRUE(std::equal(src.begin(), src.end(), dst.begin())) << "payload differs";
  for (size_t i = src.size(); i < dst.size(); ++i) ASSERT_EQ(dst[i], 0xEE) << "written past the end at " << i;
}

}  // namespace rdmad::peer::test
