// A table of malformed frames, each sent on its own connection: every one is answered with the
// expected error or drops that connection only, while a bystander client keeps working and
// nothing leaks (fds, registrations).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <functional>

#include "raw_client.h"
#include "rdmad/rdmad.h"
#include "server_fixture.h"

namespace rdmad::test {
namespace {

using proto::MsgType;
constexpr uint32_t kRw = RDMAD_ACCESS_LOCAL_WRITE | RDMAD_ACCESS_REMOTE_READ;
constexpr int kClosed = -1;  // expected outcome: the server drops the connection

struct Fds {
  int memfd = -1, unsealed = -1, pipe_r = -1, pipe_w = -1;
  Fds() {
    memfd = memfd_create("m", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    (void)!ftruncate(memfd, 8192);
    fcntl(memfd, F_ADD_SEALS, F_SEAL_SHRINK);
    unsealed = memfd_create("u", MFD_CLOEXEC);
    (void)!ftruncate(unsealed, 8192);
    int p[2];
    (void)!pipe(p);
    pipe_r = p[0], pipe_w = p[1];
  }
  ~Fds() { close(memfd), close(unsealed), close(pipe_r), close(pipe_w); }
};

std::vector<std::byte> frame(uint16_t type, uint32_t length_field, size_t body_bytes, uint16_t version = 1,
                             uint32_t flags = 0, uint32_t magic = proto::kMagic) {
  std::vector<std::byte> f(sizeof(proto::Header) + body_bytes);
  proto::Header h{magic, version, type, length_field, flags, 9};
  std::memcpy(f.data(), &h, sizeof(h));
  return f;
}

template <class Body>
std::vector<std::byte> with_body(MsgType type, const Body& body) {
  auto f = frame(static_cast<uint16_t>(type), sizeof(Body), sizeof(Body));
  std::memcpy(f.data() + sizeof(proto::Header), &body, sizeof(Body));
  return f;
}

struct Case {
  const char* name;
  bool hello_first;
  std::function<std::vector<std::byte>()> bytes;
  std::function<std::vector<int>(const Fds&)> fds;
  int expect;  // an rdmad_status, or kClosed
};

std::vector<int> none(const Fds&) { return {}; }
std::vector<int> one_memfd(const Fds& f) { return {f.memfd}; }
uint16_t t(MsgType m) { return static_cast<uint16_t>(m); }

std::vector<Case> cases() {
  auto host = [](uint64_t off, uint64_t len, uint32_t access, uint32_t mask = 0) {
    return [=] {
      return with_body(MsgType::kRegisterHost, proto::RegisterHostRequest{off, len, access, mask});
    };
  };
  return {
      {"empty datagram", true, [] { return std::vector<std::byte>{}; }, none, kClosed},
      {"shorter than header", true, [] { return std::vector<std::byte>(10); }, none, kClosed},
      {"bad magic", true, [] { return frame(t(MsgType::kQueryNics), 0, 0, 1, 0, 0xdeadbeef); }, none,
       kClosed},
      {"length field too big", true, [] { return frame(t(MsgType::kQueryNics), 100, 0); }, none, kClosed},
      {"length field too small", true, [] { return frame(t(MsgType::kDeregister), 0, 8); }, none, kClosed},
      {"oversized frame", true, [] { return frame(t(MsgType::kQueryNics), 8000, 8000); }, none, kClosed},
      {"unknown type", true, [] { return frame(99, 0, 0); }, none, RDMAD_ERR_PROTOCOL},
      {"reply type from a client", true, [] { return frame(0x8002, 0, 0); }, none, RDMAD_ERR_PROTOCOL},
      {"error type from a client", true, [] { return frame(0xffff, 0, 0); }, none, RDMAD_ERR_PROTOCOL},
      {"reserved header flags", true, [] { return frame(t(MsgType::kQueryNics), 0, 0, 1, 4); }, none,
       RDMAD_ERR_PROTOCOL},
      {"wrong header version", true, [] { return frame(t(MsgType::kQueryNics), 0, 0, 7); }, none,
       RDMAD_ERR_VERSION},
      {"register body too short", true, [] { return frame(t(MsgType::kRegisterHost), 16, 16); }, one_memfd,
       RDMAD_ERR_PROTOCOL},
      {"deregister body too long", true, [] { return frame(t(MsgType::kDeregister), 12, 12); }, none,
       RDMAD_ERR_PROTOCOL},
      {"query with a body", true, [] { return frame(t(MsgType::kQueryNics), 8, 8); }, none,
       RDMAD_ERR_PROTOCOL},
      {"register without fd", true, host(0, 4096, kRw), none, RDMAD_ERR_INVALID_ARGUMENT},
      {"two fds", true, host(0, 4096, kRw),
       [](const Fds& f) {
         return std::vector<int>{f.memfd, f.memfd};
       },
       RDMAD_ERR_INVALID_ARGUMENT},
      {"too many fds (MSG_CTRUNC)", true, host(0, 4096, kRw),
       [](const Fds& f) { return std::vector<int>(6, f.memfd); }, RDMAD_ERR_PROTOCOL},
      {"fd on a deregister", true,
       [] { return with_body(MsgType::kDeregister, proto::DeregisterRequest{5}); }, one_memfd,
       RDMAD_ERR_INVALID_ARGUMENT},
      {"zero length", true, host(0, 0, kRw), one_memfd, RDMAD_ERR_INVALID_ARGUMENT},
      {"offset overflow", true, host(~uint64_t{0} - 100, 4096, kRw), one_memfd, RDMAD_ERR_INVALID_ARGUMENT},
      {"unknown access bits", true, host(0, 4096, 0x80), one_memfd, RDMAD_ERR_INVALID_ARGUMENT},
      {"remote write without local write", true, host(0, 4096, RDMAD_ACCESS_REMOTE_WRITE), one_memfd,
       RDMAD_ERR_INVALID_ARGUMENT},
      {"range beyond the file", true, host(4096, 8192, kRw), one_memfd, RDMAD_ERR_INVALID_ARGUMENT},
      {"nic_mask beyond the NICs", true, host(0, 4096, kRw, 0x100), one_memfd, RDMAD_ERR_INVALID_ARGUMENT},
      {"unsealed memfd", true, host(0, 4096, kRw), [](const Fds& f) { return std::vector<int>{f.unsealed}; },
       RDMAD_ERR_INVALID_ARGUMENT},
      {"pipe instead of memfd", true, host(0, 4096, kRw),
       [](const Fds& f) { return std::vector<int>{f.pipe_r}; }, RDMAD_ERR_INVALID_ARGUMENT},
      {"memfd as dma-buf", true,
       [] {
         return with_body(MsgType::kRegisterDmabuf, proto::RegisterDmabufRequest{0, 4096, 0x1000, kRw, 0, {}});
       },
       one_memfd, RDMAD_ERR_INVALID_ARGUMENT},
      {"deregister handle 0", true,
       [] { return with_body(MsgType::kDeregister, proto::DeregisterRequest{0}); }, none,
       RDMAD_ERR_INVALID_ARGUMENT},
      {"deregister unknown handle", true,
       [] { return with_body(MsgType::kDeregister, proto::DeregisterRequest{123456}); }, none,
       RDMAD_ERR_NOT_FOUND},
      {"list max_entries 0", true,
       [] {
         return with_body(MsgType::kListRegistrations, proto::ListRequest{0, 0, 0});
       },
       none, RDMAD_ERR_INVALID_ARGUMENT},
      {"nearest bad kind", true,
       [] {
         return with_body(MsgType::kNearestNics, proto::NearestNicsRequest{7, -1, {}});
       },
       none, RDMAD_ERR_INVALID_ARGUMENT},
      {"nearest unterminated pci", true,
       [] {
         proto::NearestNicsRequest n{RDMAD_MEM_GPU, -1, {}};
         std::memset(n.pci_address, 'a', sizeof(n.pci_address));
         return with_body(MsgType::kNearestNics, n);
       },
       none, RDMAD_ERR_INVALID_ARGUMENT},
      {"second hello", true,
       [] {
         return with_body(MsgType::kHello, proto::HelloRequest{1, 1, 0});
       },
       none, RDMAD_ERR_PROTOCOL},
      {"request before hello", false, [] { return frame(t(MsgType::kQueryNics), 0, 0); }, none,
       RDMAD_ERR_PROTOCOL},
      {"hello min > max", false,
       [] {
         return with_body(MsgType::kHello, proto::HelloRequest{2, 1, 0});
       },
       none, RDMAD_ERR_INVALID_ARGUMENT},
      {"hello without common version", false,
       [] {
         return with_body(MsgType::kHello, proto::HelloRequest{5, 9, 0});
       },
       none, RDMAD_ERR_VERSION},
  };
}

TEST(IpcMalformedFrames, EachIsAnsweredOrDisconnectedWhileOthersKeepWorking) {
  TestServer srv;
  ASSERT_TRUE(srv.started()) << srv.start_error();
  Fds fds;
  rdmad_client* bystander = nullptr;
  ASSERT_EQ(rdmad_connect(srv.path().c_str(), &bystander), RDMAD_OK);
  rdmad_host_buffer buf;
  ASSERT_EQ(rdmad_alloc_host(4096, &buf), RDMAD_OK);
  size_t fds_before = open_fd_count();
  auto all = cases();
  ASSERT_GE(all.size(), 20u);
  for (const Case& c : all) {
    SCOPED_TRACE(c.name);
    RawClient raw(srv.path());
    ASSERT_TRUE(raw.connected());
    if (c.hello_first) {
      ASSERT_TRUE(raw.hello());
    }
    auto bytes = c.bytes();
    ASSERT_TRUE(raw.send_bytes(bytes.data(), bytes.size(), c.fds(fds)));
    RawReply r = raw.receive();
    if (c.expect == kClosed) {
      EXPECT_TRUE(r.closed) << "got a reply of type " << r.header.type;
    } else {
      ASSERT_FALSE(r.closed);
      EXPECT_EQ(r.header.type, t(MsgType::kError));
      EXPECT_EQ(static_cast<int>(r.status()), c.expect) << r.message();
      EXPECT_FALSE(r.message().empty());
      // The connection survives an error reply.
      raw.send_empty(MsgType::kDiagnose, 77);
      RawReply again = raw.receive();
      EXPECT_FALSE(again.closed);
      EXPECT_EQ(again.header.request_id, 77u);
    }
    rdmad_mr* mr = nullptr;
    ASSERT_EQ(rdmad_register_host(bystander, buf.fd, 0, 4096, kRw, 0, &mr), RDMAD_OK)
        << rdmad_last_error(bystander);
    ASSERT_EQ(rdmad_deregister(bystander, mr), RDMAD_OK);
  }
  EXPECT_TRUE(eventually([&] { return srv.client_count() == 1 && open_fd_count() == fds_before; }))
      << open_fd_count() << " fds vs " << fds_before;
  EXPECT_EQ(srv.region_count(), 0u);
  EXPECT_GE(srv.metric("rdmad_client_requests_total", {{"op", "unknown"}, {"result", "protocol"}}), 6.0);
  rdmad_free_host(&buf);
  rdmad_disconnect(bystander);
}

}  // namespace
}  // namespace rdmad::test
