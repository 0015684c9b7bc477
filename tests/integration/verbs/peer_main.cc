// Test peer for the two-process verbs tests: opens one soft device, prints how to reach it, connects
// to the QP named on stdin, then echoes every SEND it receives back as a SEND and exposes a buffer
// for remote READ/WRITE. Exits when stdin closes.
//   stdout: "port <udp> qpn <qpn> addr <va> rkey <rkey> len <bytes>"
//   stdin:  "<peer udp port> <peer qpn> <mtu>"
#include <poll.h>
#include <unistd.h>

#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <vector>

#include "rdmad/base/assert.h"
#include "rdmad/verbs/soft/soft_backend.h"

using namespace rdmad::verbs;

int main() {
  BackendRegistry reg;
  soft::register_backend(reg);
  DeviceConfig cfg;
  cfg.backend_options["udp_port"] = 0;
  auto dev = reg.open("soft", cfg);
  if (!dev.ok()) {
    std::fprintf(stderr, "peer: %s\n", dev.status().message().c_str());
    return 1;
  }
  auto pd = std::move((*dev)->alloc_pd().value());
  auto scq = std::move((*dev)->create_cq(1024).value());
  auto rcq = std::move((*dev)->create_cq(1024).value());
  QpInitAttr ia;
  ia.send_cq = scq.get();
  ia.recv_cq = rcq.get();
  auto qp = std::move(pd->create_qp(ia).value());
  constexpr size_t kBytes = 16u << 20;
  std::vector<uint8_t> window(kBytes), echo(1u << 20);
  auto wmr = std::move(pd->reg_mr(window.data(), window.size(),
                                  kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead)
                           .value());
  auto emr = std::move(pd->reg_mr(echo.data(), echo.size(), kAccessLocalWrite).value());
  PortInfo port = (*dev)->query_port(1).value();
  std::printf("port %u qpn %u addr %" PRIu64 " rkey %u len %zu\n", port.udp_port, qp->qp_num(),
              reinterpret_cast<uint64_t>(window.data()), wmr->rkey(), window.size());
  std::fflush(stdout);
  unsigned peer_port = 0, peer_qpn = 0, mtu = 0;
  if (std::scanf("%u %u %u", &peer_port, &peer_qpn, &mtu) != 3) return 2;

  QpAttr a;
  a.state = QpState::kInit;
  a.access_flags = kAccessRemoteWrite | kAccessRemoteRead;
  if (!qp->modify(a, kQpState | kQpAccessFlags).ok()) return 3;
  a.state = QpState::kRtr;
  a.path_mtu_bytes = mtu;
  a.dest_qp_num = peer_qpn;
  a.rq_psn = 1000;
  a.dest_gid = port.gid;
  a.dest_udp_port = static_cast<uint16_t>(peer_port);
  a.min_rnr_timer = 1;
  if (!qp->modify(a, kQpState | kQpPathMtu | kQpDestQpn | kQpRqPsn | kQpAv | kQpMinRnrTimer).ok()) return 4;
  a.state = QpState::kRts;
  a.sq_psn = 2000;
  a.timeout = 12;
  if (!qp->modify(a, kQpState | kQpSqPsn | kQpTimeout).ok()) return 5;

  RecvWr r;
  r.sge = {reinterpret_cast<uint64_t>(echo.data()), static_cast<uint32_t>(echo.size()), emr->lkey()};
  RDMAD_ASSERT(qp->post_recv({&r, 1}).ok(), "post_recv failed");
  std::printf("ready\n");
  std::fflush(stdout);
  pollfd in{0, POLLIN, 0};
  WorkCompletion wc[16];
  for (;;) {
    if (poll(&in, 1, 0) > 0) {
      char buf[64];
      if (read(0, buf, sizeof buf) <= 0) break;
    }
    size_t n = rcq->poll(wc);
    for (size_t i = 0; i < n; ++i) {
      if (wc[i].status != WcStatus::kSuccess) return 6;
      SendWr s;
      s.opcode = WrOpcode::kSendWithImm;
      s.imm_data = wc[i].imm_data + 1;
      s.sge = {reinterpret_cast<uint64_t>(echo.data()), wc[i].byte_len, emr->lkey()};
      RDMAD_ASSERT(qp->post_send({&s, 1}).ok(), "post_send failed");
      // The echo buffer is reused only after the echo completed.
      while (scq->poll({wc + 8, 1}) == 0) {
      }
      RDMAD_ASSERT(qp->post_recv({&r, 1}).ok(), "post_recv failed");
    }
    if (n == 0) usleep(100);
  }
  return 0;
}
