// Our packets on the wire: a loopback capture decoded by tshark as InfiniBand over UDP carries the
// opcodes, destination QPNs and PSNs we sent. Skips (with the reason) where tshark or capturing on
// the loopback interface is unavailable.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <sstream>

#include "unit/verbs/verbs_test_util.h"

namespace rdmad::verbs::test {
namespace {

constexpr uint32_t kProbeQpn = 0xABCDE;  // no such QP: the NIC drops the probes
constexpr const char* kProbeText = ",0x0abcde,";  // how tshark prints its destination QP

std::string qpn_hex(uint32_t qpn) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%06x", qpn);
  return buf;
}

struct Tshark {
  pid_t pid = -1;
  int out = -1;
  std::string buffered;
  ~Tshark() {
    if (pid > 0) {
      // tshark captures through a dumpcap child: SIGKILL to tshark alone would leave dumpcap
      // capturing lo (and slowing every later loopback test), so kill the whole process group.
      kill(-pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
    if (out >= 0) close(out);
  }
  // Next line of tshark's output, or nullopt at the deadline.
  std::optional<std::string> line(std::chrono::steady_clock::time_point deadline) {
    for (;;) {
      auto nl = buffered.find('\n');
      if (nl != std::string::npos) {
        std::string l = buffered.substr(0, nl);
        buffered.erase(0, nl + 1);
        return l;
      }
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return std::nullopt;
      pollfd p{out, POLLIN, 0};
      if (poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count(), 50))) <= 0) continue;
      char buf[512];
      ssize_t n = read(out, buf, sizeof buf);
      if (n <= 0) return std::nullopt;
      buffered.append(buf, static_cast<size_t>(n));
    }
  }
};

// Live-decodes UDP traffic to ports `port` and `port2` as InfiniBand, one
// "opcode,destqp,psn,srcport" line per packet.
bool start_tshark(Tshark& t, uint16_t port, uint16_t port2) {
  int out[2];
  if (pipe(out) != 0) return false;
  t.pid = fork();
  if (t.pid == 0) {
    setpgid(0, 0);
    dup2(out[1], 1);
    int devnull = open("/dev/null", O_WRONLY);
    dup2(devnull, 2);
    std::string filter = "udp dst port " + std::to_string(port) + " or udp dst port " + std::to_string(port2);
    std::string decode = "udp.port==" + std::to_string(port) + ",infiniband";
    std::string decode2 = "udp.port==" + std::to_string(port2) + ",infiniband";
    execlp("tshark", "tshark", "-l", "-n", "-i", "lo", "-f", filter.c_str(), "-d", decode.c_str(), "-d",
           decode2.c_str(), "-T", "fields", "-E", "separator=,", "-e", "infiniband.bth.opcode", "-e",
           "infiniband.bth.destqp", "-e", "infiniband.bth.psn", "-e", "udp.srcport", nullptr);
    _exit(127);
  }
  if (t.pid > 0) setpgid(t.pid, t.pid);  // also here: the kill must not race the child's setpgid
  close(out[1]);
  t.out = out[0];
  return t.pid > 0;
}

void send_probe(uint16_t port) {
  uint8_t bth[32] = {0x81, 0, 0xFF, 0xFF, 0x40, static_cast<uint8_t>(kProbeQpn >> 16),
                     static_cast<uint8_t>(kProbeQpn >> 8), static_cast<uint8_t>(kProbeQpn)};
  int fd = socket(AF_INET, SOCK_DGRAM, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  sendto(fd, bth, sizeof bth, 0, reinterpret_cast<sockaddr*>(&sa), sizeof sa);
  close(fd);
}

TEST(Capture, TsharkDecodesOurRoceV2Packets) {
  if (system("command -v tshark > /dev/null 2>&1") != 0) GTEST_SKIP() << "tshark is not installed";
  std::string skip;
  Endpoint a, b;
  // With UDP segmentation offload a capture on lo sees each run of packets as one coalesced
  // datagram (the kernel never splits it on loopback); this test is about the packets a NIC
  // without the offload puts on a wire.
  DeviceConfig c = soft_config();
  c.backend_options["udp_offload"] = false;
  make_endpoint(a, open_device("soft", c, &skip));
  make_endpoint(b, open_device("soft", c, &skip));
  ConnectOptions o;
  o.mtu = 256;
  o.sq_psn = 100;
  o.rq_psn = 500;
  connect_pair(a, b, o);
  const uint16_t port = b.dev->query_port(1).value().udp_port;
  const uint16_t port_a = a.dev->query_port(1).value().udp_port;
  Tshark t;
  ASSERT_TRUE(start_tshark(t, port, port_a));
  // "Capturing on" comes before the filter is live: probe until tshark shows a probe.
  auto start_deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  bool live = false;
  while (!live && std::chrono::steady_clock::now() < start_deadline) {
    send_probe(port);
    auto l = t.line(std::chrono::steady_clock::now() + std::chrono::milliseconds(200));
    live = l.has_value() && l->find(kProbeText) != std::string::npos;
  }
  if (!live) GTEST_SKIP() << "tshark could not capture on lo (needs root or CAP_NET_RAW)";

  std::vector<uint8_t> src(600), dst(600, 0);
  fill_pattern(src, 7);
  auto smr = std::move(a.pd->reg_mr(src.data(), src.size(), 0).value());
  auto dmr = std::move(b.pd->reg_mr(dst.data(), dst.size(), kAccessLocalWrite | kAccessRemoteWrite).value());
  SendWr w;
  w.opcode = WrOpcode::kRdmaWrite;
  w.sge = {reinterpret_cast<uint64_t>(src.data()), 600, smr->lkey()};
  w.remote_addr = reinterpret_cast<uint64_t>(dst.data());
  w.rkey = dmr->rkey();
  ASSERT_TRUE(a.qp->post_send({&w, 1}).ok());
  auto wcs = wait_completions(*a.scq, 1);
  ASSERT_EQ(wcs.size(), 1u);
  ASSERT_EQ(wcs[0].status, WcStatus::kSuccess);
  ASSERT_TRUE(src == dst);

  auto fmt = [](unsigned op, uint32_t qpn, uint32_t psn) {
    return std::to_string(op) + "," + qpn_hex(qpn) + "," + std::to_string(psn);
  };
  const uint32_t bq = b.qp->qp_num(), aq = a.qp->qp_num();
  // WRITE First/Middle/Last (opcodes 6, 7, 8) with PSNs 100..102, then the ACK (17) of PSN 102.
  std::vector<std::string> want = {fmt(6, bq, 100), fmt(7, bq, 101), fmt(8, bq, 102), fmt(17, aq, 102)};
  std::vector<std::string> got;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  std::ostringstream all;
  while (got.size() < want.size()) {
    auto l = t.line(deadline);
    if (!l) break;
    all << *l << "\n";
    if (l->find(kProbeText) == std::string::npos) got.push_back(*l);
  }
  ASSERT_EQ(got.size(), want.size()) << all.str();
  for (size_t i = 0; i < want.size(); ++i) {
    // RoCEv2 source ports are 49152-65535 (ECMP entropy), one per QP: never the listening port.
    const size_t comma = got[i].rfind(',');
    ASSERT_NE(comma, std::string::npos) << all.str();
    EXPECT_EQ(got[i].substr(0, comma), want[i]) << all.str();
    const int source_port = std::stoi(got[i].substr(comma + 1));
    EXPECT_GE(source_port, 49152) << all.str();
    EXPECT_LE(source_port, 65535) << all.str();
  }
}

}  // namespace
}  // namespace rdmad::verbs::test
