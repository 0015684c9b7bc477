// Writes the seed corpus of peer_wire_fuzz: one well-formed frame of every message type (with the
// real encoders), plus a few malformed ones. Usage: peer_fuzz_gen_corpus DIR
#include <string>
#include <vector>

#include "../corpus_dir.h"
#include "rdmad/daemon/peer/wire.h"

using namespace rdmad::peer;
using rdmad::fuzz::write_seed;

namespace {

template <typename M>
void frame(const std::string& dir, const std::string& name, MessageType type, const M& m) {
  write_seed(dir, name, encode_frame(type, encode(m)));
}

}  // namespace

int main(int argc, char** argv) {
  const std::string dir = rdmad::fuzz::corpus_dir_from_args(argc, argv);
  Hello hello;
  hello.node_id = "node-a.example";
  frame(dir, "hello", MessageType::kHello, hello);
  Hello stranger = hello;
  stranger.magic = 0x48545450;  // "HTTP"
  frame(dir, "hello_stranger", MessageType::kHello, stranger);
  Hello old = hello;
  old.version = 2;  // a version-2 peer (HMAC handshake): refused at hello
  frame(dir, "hello_version2", MessageType::kHello, old);
  old.version = 3;  // a version-3 peer (no LID, one rkey per key): refused at hello
  frame(dir, "hello_version3", MessageType::kHello, old);
  write_seed(dir, "ready", encode_frame(MessageType::kReady, {}));
  frame(dir, "ping", MessageType::kPing, Ping{42});
  Endpoints ep;
  ep.kind = EndpointsKind::kOffer;
  ep.session = 7;
  for (uint16_t i = 0; i < 2; ++i) {
    NicEndpoint n;
    n.nic_name = "mlx5_" + std::to_string(i);
    n.nic_index = i;
    n.qp_index = 0;
    n.udp_port = 4791;
    n.qpn = 0x100 + i;
    n.psn = 0xABCDE;
    n.mtu_bytes = 4096;
    ep.endpoints.push_back(n);
  }
  frame(dir, "endpoints_offer", MessageType::kEndpoints, ep);
  ep.kind = EndpointsKind::kRebuildAnswer;
  ep.nic_index = 1;
  frame(dir, "endpoints_rebuild", MessageType::kEndpoints, ep);
  ep.kind = EndpointsKind::kRebuildOffer;
  ep.cause = RebuildCause::kRequestRefused;
  frame(dir, "endpoints_rebuild_refused", MessageType::kEndpoints, ep);
  // [flow] qps_per_lane = 4: four QPs per NIC, then the same with one QP named twice (refused).
  Endpoints lanes;
  lanes.kind = EndpointsKind::kOffer;
  lanes.session = 9;
  for (uint16_t i = 0; i < 2; ++i) {
    for (uint16_t j = 0; j < 4; ++j) {
      NicEndpoint n = ep.endpoints[i];
      n.qp_index = j;
      n.qpn = 0x200u + 4u * i + j;
      lanes.endpoints.push_back(n);
    }
  }
  frame(dir, "endpoints_qps_per_lane", MessageType::kEndpoints, lanes);
  lanes.endpoints[1].qp_index = 0;
  frame(dir, "bad_endpoints_qp_twice", MessageType::kEndpoints, lanes);
  Endpoints ib;
  ib.kind = EndpointsKind::kAnswer;
  ib.session = 8;
  NicEndpoint port;
  port.nic_name = "ib0";
  port.link = EndpointLink::kInfiniband;
  port.gid = *rdmad::verbs::Gid::from_ip("fe80::e41d:2d03:a:1b30");
  port.lid = 0x2a;
  port.qpn = 0x3f1;
  port.psn = 0x123;
  port.mtu_bytes = 4096;
  ib.endpoints.push_back(port);
  frame(dir, "endpoints_infiniband", MessageType::kEndpoints, ib);
  Grant g;
  g.token.fill(0x11);
  g.iova = 0x10000;
  g.length = 1 << 20;
  g.rights = kGrantRightsMask;
  g.keys = {{0, 0x1234}, {1, 0x5678}};
  frame(dir, "grant", MessageType::kGrant, g);
  Grant sliced = g;  // 8 GiB held as three MRs on NIC 0 (3.5 GiB slices), one on NIC 1
  sliced.length = 8ull << 30;
  sliced.keys = {{0, 0x1234, 3584ull << 20, {0x2234, 0x3234}}, {1, 0x5678}};
  frame(dir, "grant_sliced", MessageType::kGrant, sliced);
  frame(dir, "grant_ack", MessageType::kGrantAck, GrantAck{g.token, 0});
  frame(dir, "revoke", MessageType::kRevoke, Revoke{g.token});
  RecvPost rp;
  rp.session = 0x5e55;
  rp.seq = 41;
  rp.channel = 3;
  rp.recv_id = 9;
  rp.iova = 0x2000;
  rp.length = 4096;
  rp.keys = {{0, 0x99}};
  frame(dir, "recv_post", MessageType::kRecvPost, rp);
  frame(dir, "send_done", MessageType::kSendDone, SendDone{3, 9, 4096, 0});
  frame(dir, "recv_query", MessageType::kRecvQuery, RecvQuery{3, 9, 1, 0x11});
  frame(dir, "recv_state", MessageType::kRecvState, RecvState{9, RecvStateKind::kPlaced});
  const RecvCancel rc{rp.session, rp.seq, rp.channel, 1000, rp.recv_id};
  frame(dir, "recv_cancel", MessageType::kRecvCancel, rc);
  // Lane mail (a kind byte, then the message), as the target also decodes every payload as one.
  write_seed(dir, "lane_mail_recv_cancel", encode_frame(MessageType::kRecvCancel, encode_mail(Mail{rc})));
  write_seed(dir, "lane_mail_recv_post", encode_frame(MessageType::kRecvPost, encode_mail(Mail{rp})));
  write_seed(dir, "lane_mail_send_done", encode_frame(MessageType::kSendDone, encode_mail(Mail{SendDone{3, 9, 4096, 0}})));
  // Malformed: reserved header bits, unknown type, the retired HMAC proof (type 2), a payload cut short.
  write_seed(dir, "bad_reserved", {0, 0, 0, 0, 0, 4, 0, 1});
  write_seed(dir, "bad_type", {0, 0, 0, 0, 0, 99, 0, 0});
  std::vector<uint8_t> auth = encode_frame(MessageType::kReady, std::vector<uint8_t>(32, 0xA5));
  auth[5] = 2;
  write_seed(dir, "bad_retired_auth", auth);
  std::vector<uint8_t> cut = encode_frame(MessageType::kGrant, encode(g));
  cut.resize(cut.size() - 5);
  write_seed(dir, "bad_short_grant", cut);
  return 0;
}
