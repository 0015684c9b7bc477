// Fair service on one worker: a client that pipelines requests gets a few per turn
// (kFramesPerTurn), so a quiet client's request is served after a bounded number of the chatty
// one's, however many are queued; and a large registration is served on a bulk thread, so the
// small requests of the worker's other clients do not wait for it. Both are checked by the order
// in which requests reach the registrar, or by what completes while a registration is held, never
// by a timed assertion.
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "raw_client.h"
#include "rdmad/rdmad.h"
#include "server_fixture.h"

namespace rdmad::test {
namespace {

constexpr uint32_t kRw = RDMAD_ACCESS_LOCAL_WRITE | RDMAD_ACCESS_REMOTE_WRITE | RDMAD_ACCESS_REMOTE_READ;
constexpr uint64_t kPage = 4096;

auto one_worker() {
  return [](clients::IpcConfig& c) { c.workers = 1; };
}

// Holds every registration of at least `min_length` bytes until released (or 20 s pass, so a
// broken server fails the test instead of hanging it).
class Gate {
 public:
  explicit Gate(uint64_t min_length) : min_(min_length) {}
  void operator()(uint64_t length) {
    if (length < min_) return;
    std::unique_lock lock(mu_);
    ++held_;
    cv_.notify_all();
    cv_.wait_for(lock, std::chrono::seconds(20), [&] { return open_; });
  }
  void open() {
    std::lock_guard lock(mu_);
    open_ = true;
    cv_.notify_all();
  }
  bool wait_held(int n) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(5), [&] { return held_ >= n; });
  }
  bool is_open() {
    std::lock_guard lock(mu_);
    return open_;
  }

 private:
  const uint64_t min_;
  std::mutex mu_;
  std::condition_variable cv_;
  int held_ = 0;
  bool open_ = false;
};

TEST(IpcFairness, AQuietClientIsServedWhileAChattyOneFloods) {
  TestServer srv(one_worker());
  std::mutex mu;
  std::vector<uint64_t> order;  // lengths, in the order the registrar saw them
  srv.registrar().set_register_hook([&](uint64_t length) {
    std::lock_guard lock(mu);
    order.push_back(length);
  });
  RawClient chatty(srv.path()), quiet(srv.path());
  ASSERT_TRUE(chatty.hello() && quiet.hello());
  constexpr uint32_t kFlood = 150;
  rdmad_host_buffer buf;
  ASSERT_EQ(rdmad_alloc_host((kFlood + 2) * kPage, &buf), RDMAD_OK);
  uint32_t sent = 0;
  {
    // The worker blocks on the table in the chatty client's first request; meanwhile the rest of
    // the flood and then the quiet client's one request queue up in the sockets.
    auto table = srv.server().service().lock_table_for_test();
    for (; sent < kFlood; ++sent) {
      if (!chatty.send(proto::MsgType::kRegisterHost, proto::RegisterHostRequest{sent * kPage, kPage, kRw, 0},
                       100 + sent, {buf.fd}, proto::kVersionMin, MSG_DONTWAIT))
        break;
    }
    ASSERT_GE(sent, 80u) << "the socket took too few requests to tell a fair worker from one that is not";
    ASSERT_TRUE(quiet.send(proto::MsgType::kRegisterHost,
                           proto::RegisterHostRequest{kFlood * kPage, 2 * kPage, kRw, 0}, 7, {buf.fd}));
  }
  RawReply r = quiet.receive();
  ASSERT_FALSE(r.closed);
  EXPECT_EQ(r.header.type, proto::reply_type(proto::MsgType::kRegisterHost)) << r.message();
  for (uint32_t i = 0; i < sent; ++i) {
    RawReply c = chatty.receive();
    ASSERT_FALSE(c.closed) << "reply " << i;
    ASSERT_EQ(c.header.type, proto::reply_type(proto::MsgType::kRegisterHost)) << c.message();
  }
  std::lock_guard lock(mu);
  ASSERT_EQ(order.size(), sent + 1);
  const auto quiet_at = static_cast<size_t>(std::find(order.begin(), order.end(), 2 * kPage) - order.begin());
  // The chatty client's turn in progress, and at most one more, go first: a worker that served a
  // connection until it ran dry (or 64 at a time) would serve the whole flood, or 64 of it, first.
  EXPECT_LE(quiet_at, 8u) << "the quiet client's request was served after " << quiet_at << " of the chatty one's "
                          << sent;
  rdmad_free_host(&buf);
}

TEST(IpcFairness, SmallRequestsAreServedWhileALargeRegistrationIsInProgress) {
  TestServer srv(one_worker());  // every connection on the same worker
  Gate gate(1 << 20);
  srv.registrar().set_register_hook([&](uint64_t length) { gate(length); });
  rdmad_client* big = nullptr;
  rdmad_client* small = nullptr;
  ASSERT_EQ(rdmad_connect(srv.path().c_str(), &big), RDMAD_OK);
  ASSERT_EQ(rdmad_connect(srv.path().c_str(), &small), RDMAD_OK);
  rdmad_host_buffer big_buf, small_buf;
  ASSERT_EQ(rdmad_alloc_host(4 << 20, &big_buf), RDMAD_OK);
  ASSERT_EQ(rdmad_alloc_host(kPage, &small_buf), RDMAD_OK);
  std::atomic<int> big_status{-1};
  std::thread registering([&] {
    rdmad_mr* mr = nullptr;
    big_status = rdmad_register_host(big, big_buf.fd, 0, 4 << 20, kRw, 0, &mr);
  });
  ASSERT_TRUE(gate.wait_held(1)) << "the large registration never reached the registrar";
  // The large registration is held in the registrar. The other client's requests on the same
  // worker complete meanwhile (with the registration on the worker they would wait for the gate).
  for (int i = 0; i < 20; ++i) {
    rdmad_mr* mr = nullptr;
    ASSERT_EQ(rdmad_register_host(small, small_buf.fd, 0, kPage, kRw, 0, &mr), RDMAD_OK) << rdmad_last_error(small);
    ASSERT_EQ(rdmad_deregister(small, mr), RDMAD_OK) << rdmad_last_error(small);
  }
  EXPECT_FALSE(gate.is_open());
  EXPECT_EQ(big_status.load(), -1) << "the large registration finished before it was let go";
  gate.open();
  registering.join();
  EXPECT_EQ(big_status.load(), RDMAD_OK);
  EXPECT_EQ(srv.handle_count(), 1u);
  rdmad_disconnect(big);
  rdmad_disconnect(small);
  EXPECT_TRUE(eventually([&] { return srv.handle_count() == 0 && srv.region_count() == 0; }));
  rdmad_free_host(&big_buf);
  rdmad_free_host(&small_buf);
}

// A client that goes away while its large registration is being made on a bulk thread leaves
// nothing behind: the registration completes, its reply finds the socket closed, and the
// connection's release takes the registration back.
TEST(IpcFairness, AClientGoneDuringItsLargeRegistrationLeavesNothing) {
  TestServer srv(one_worker());
  Gate gate(1 << 20);
  srv.registrar().set_register_hook([&](uint64_t length) { gate(length); });
  rdmad_host_buffer buf;
  ASSERT_EQ(rdmad_alloc_host(2 << 20, &buf), RDMAD_OK);
  {
    RawClient raw(srv.path());
    ASSERT_TRUE(raw.hello());
    ASSERT_TRUE(raw.send(proto::MsgType::kRegisterHost, proto::RegisterHostRequest{0, 2 << 20, kRw, 0}, 5, {buf.fd}));
    ASSERT_TRUE(gate.wait_held(1));
  }  // closed while the registration is held
  gate.open();
  EXPECT_TRUE(eventually([&] {
    return srv.client_count() == 0 && srv.handle_count() == 0 && srv.region_count() == 0 &&
           srv.registrar().live_regions() == 0;
  })) << srv.handle_count() << " handles, " << srv.registrar().live_regions() << " registrar regions left";
  rdmad_free_host(&buf);
}

}  // namespace
}  // namespace rdmad::test
