#include "hw_loopback.h"

#include <fmt/format.h>

#include <chrono>

#include "rdmad/nic_cc/sysfs_root.h"
#include "gid_selector.h"
#include "qp_attrs.h"

namespace rdmad::verbs::rdma_core::hw {

namespace {

std::optional<QueuePair> make_qp(const ProtectionDomain& pd, const CompletionQueue& cq, std::string& why) {
  ibv_qp_init_attr init{};
  init.qp_type = IBV_QPT_RC;
  init.cap.max_send_wr = 16;
  init.cap.max_recv_wr = 16;
  init.cap.max_send_sge = 4;
  init.cap.max_recv_sge = 1;
  auto qp = QueuePair::create(pd, cq, cq, init);
  if (!qp) {
    why = qp.error().message();
    return std::nullopt;
  }
  return std::move(qp).value();
}

std::string bring_up(const QueuePair& qp, const RcQpConfig& cfg, const RcRemote& remote, uint32_t sq_psn) {
  for (const auto& t : {rc_init(cfg), rc_rtr(cfg, remote), rc_rts(cfg, sq_psn)}) {
    if (auto r = qp.modify(t.attr, t.mask); !r) return r.error().message();
  }
  return {};
}

}  // namespace

std::optional<Loopback> make_loopback(ibv_device* device, const PortInfo& port, std::string& why) {
  auto ctx = Context::open(device);
  if (!ctx) {
    why = ctx.error().message();
    return std::nullopt;
  }
  auto pd = ProtectionDomain::allocate(*ctx);
  if (!pd) {
    why = pd.error().message();
    return std::nullopt;
  }
  auto cq = CompletionQueue::create(*ctx, 64, nullptr, 0);
  if (!cq) {
    why = cq.error().message();
    return std::nullopt;
  }
  auto a = make_qp(*pd, *cq, why);
  auto b = a ? make_qp(*pd, *cq, why) : std::nullopt;
  if (!b) return std::nullopt;

  RcQpConfig cfg;
  cfg.port_num = static_cast<uint8_t>(port.port);
  cfg.path_mtu = port.active_mtu_bytes >= 4096   ? IBV_MTU_4096
                 : port.active_mtu_bytes >= 2048 ? IBV_MTU_2048
                                                 : IBV_MTU_1024;
  std::variant<RocePath, IbPath> path;
  std::string how;
  if (port.link_layer == LinkLayer::kEthernet) {
    auto table = read_gid_table_verbs(ctx->get(), ctx->device(), port.port);
    if (!table) {
      why = table.error().message();
      return std::nullopt;
    }
    GidMatch match;
    match.netdev = port.netdev;
    match.family = IpFamily::kAny;
    const auto choice = select_gid(*table, match);
    if (!choice.ok()) {
      why = choice.reason;
      return std::nullopt;
    }
    RocePath rp;
    rp.dgid = choice.entry->gid;
    rp.sgid_index = static_cast<uint8_t>(choice.entry->index);
    path = rp;
    how = "RoCE " + choice.reason;
  } else {
    path = IbPath{port.lid, 0, 0};
    how = fmt::format("InfiniBand lid 0x{:x}", port.lid);
  }
  constexpr uint32_t kPsnA = 0x123456, kPsnB = 0x654321;
  if (auto e = bring_up(*a, cfg, RcRemote{b->qp_num(), kPsnB, path}, kPsnA); !e.empty()) {
    why = e;
    return std::nullopt;
  }
  if (auto e = bring_up(*b, cfg, RcRemote{a->qp_num(), kPsnA, path}, kPsnB); !e.empty()) {
    why = e;
    return std::nullopt;
  }
  return Loopback{std::move(ctx).value(), std::move(pd).value(), std::move(cq).value(),
                  std::move(*a),          std::move(*b),         how};
}

std::string write_and_wait(const QueuePair& qp, const CompletionQueue& cq, std::vector<ibv_sge> sges,
                           uint64_t raddr, uint32_t rkey) {
  ibv_send_wr wr{};
  wr.wr_id = 42;
  wr.sg_list = sges.data();
  wr.num_sge = static_cast<int>(sges.size());
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = raddr;
  wr.wr.rdma.rkey = rkey;
  ibv_send_wr* bad = nullptr;
  if (const int rc = ibv_post_send(qp.get(), &wr, &bad); rc != 0) {
    return VerbsError{"ibv_post_send", qp.device(), rc}.message();
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (std::chrono::steady_clock::now() < deadline) {
    ibv_wc wc{};
    const int n = ibv_poll_cq(cq.get(), 1, &wc);
    if (n < 0) return "ibv_poll_cq failed";
    if (n == 0) continue;
    if (wc.status != IBV_WC_SUCCESS)
      return fmt::format("completion status: {}", ibv_wc_status_str(wc.status));
    if (wc.wr_id != 42) return fmt::format("unexpected wr_id {}", wc.wr_id);
    return {};
  }
  return "no completion within 5 s";
}

}  // namespace rdmad::verbs::rdma_core::hw
