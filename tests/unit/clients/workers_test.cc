// The client service with its connections spread over several worker threads: concurrent
// registrations, quotas shared across workers, a client dying mid-request, and requests that hop
// to the control thread answered in order.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <set>
#include <thread>
#include <vector>

#include "raw_client.h"
#include "rdmad/rdmad.h"
#include "server_fixture.h"

namespace rdmad::test {
namespace {

constexpr uint32_t kRw = RDMAD_ACCESS_LOCAL_WRITE | RDMAD_ACCESS_REMOTE_WRITE | RDMAD_ACCESS_REMOTE_READ;
constexpr uint64_t kPage = 4096;

auto with_workers(uint32_t n, clients::Quota quota = {}) {
  return [n, quota](clients::IpcConfig& c) {
    c.workers = n;
    c.default_quota = quota;
  };
}

// Releases every waiting thread at once, so requests of several clients overlap.
class StartLine {
 public:
  explicit StartLine(int parties) : waiting_(parties) {}
  void arrive_and_wait() {
    waiting_.fetch_sub(1);
    while (waiting_.load() > 0) std::this_thread::yield();
  }

 private:
  std::atomic<int> waiting_;
};

TEST(IpcWorkers, ClientsOnEveryWorkerRegisterConcurrentlyByteExact) {
  TestServer srv(with_workers(4));
  constexpr int kClients = 16, kPairs = 100, kKept = 8;
  std::atomic<int> failures{0};
  std::vector<rdmad_client*> clients(kClients);
  std::vector<rdmad_host_buffer> bufs(kClients);
  std::vector<std::vector<uint64_t>> kept(kClients);
  StartLine line(kClients);
  std::vector<std::thread> threads;
  for (int t = 0; t < kClients; ++t) {
    threads.emplace_back([&, t] {
      if (rdmad_connect(srv.path().c_str(), &clients[t]) != RDMAD_OK ||
          rdmad_alloc_host(kKept * kPage, &bufs[t]) != RDMAD_OK) {
        ++failures;
        line.arrive_and_wait();
        return;
      }
      auto* bytes = static_cast<uint8_t*>(bufs[t].addr);
      for (uint64_t i = 0; i < kKept * kPage; ++i)
        bytes[i] = static_cast<uint8_t>(t * 31 + i / kPage * 7 + i);
      line.arrive_and_wait();
      for (int i = 0; i < kPairs; ++i) {
        rdmad_mr* mr = nullptr;
        uint64_t off = static_cast<uint64_t>(i % kKept) * kPage;
        if (rdmad_register_host(clients[t], bufs[t].fd, off, kPage, kRw, 0, &mr) != RDMAD_OK ||
            rdmad_mr_length(mr) != kPage || rdmad_mr_nic_count(mr) != 2 ||
            rdmad_deregister(clients[t], mr) != RDMAD_OK)
          ++failures;
      }
      for (int k = 0; k < kKept; ++k) {
        rdmad_mr* mr = nullptr;
        if (rdmad_register_host(clients[t], bufs[t].fd, k * kPage, kPage, kRw, 0, &mr) != RDMAD_OK) {
          ++failures;
          continue;
        }
        kept[t].push_back(rdmad_mr_handle(mr));
      }
    });
  }
  for (auto& th : threads) th.join();
  ASSERT_EQ(failures.load(), 0);
  EXPECT_EQ(srv.handle_count(), size_t{kClients * kKept});
  EXPECT_EQ(srv.region_count(), size_t{kClients * kKept});
  std::set<uint64_t> distinct;
  for (int t = 0; t < kClients; ++t) {
    for (int k = 0; k < kKept; ++k) {
      uint64_t handle = kept[t][k];
      distinct.insert(handle);
      // What the backend reads through the daemon's mapping is the client's page, byte for byte.
      auto seen = srv.on_server([&] {
        auto span = srv.registrar().region_for_test(srv.server().service().mr_id_for_test(handle));
        return std::vector<std::byte>(span.begin(), span.end());
      });
      ASSERT_EQ(seen.size(), kPage);
      EXPECT_EQ(std::memcmp(seen.data(), static_cast<std::byte*>(bufs[t].addr) + k * kPage, kPage), 0)
          << "client " << t << " page " << k;
    }
  }
  EXPECT_EQ(distinct.size(), size_t{kClients * kKept});
  EXPECT_EQ(srv.metric("rdmad_client_requests_total", {{"op", "register_host"}, {"result", "ok"}}),
            double(kClients * (kPairs + kKept)));
  EXPECT_EQ(srv.metric("rdmad_registrations", {{"kind", "host"}}), double(kClients * kKept));
  for (int t = 0; t < kClients; ++t) {
    rdmad_disconnect(clients[t]);
    rdmad_free_host(&bufs[t]);
  }
  EXPECT_TRUE(eventually([&] { return srv.region_count() == 0 && srv.client_count() == 0; }));
  EXPECT_EQ(srv.on_server([&] { return srv.registrar().live_regions(); }), 0u);
  EXPECT_EQ(srv.metric("rdmad_registered_bytes", {{"kind", "host"}}), 0.0);
}

// kClients clients on 4 workers race to register kEach distinct pages each; returns how many
// registrations succeeded and checks that every other one failed with a quota error.
int race_for_quota(TestServer& srv, int clients, int each) {
  std::atomic<int> ok{0}, other{0};
  StartLine line(clients);
  std::vector<std::thread> threads;
  std::vector<rdmad_client*> conns(clients, nullptr);
  std::vector<rdmad_host_buffer> bufs(clients);
  for (int t = 0; t < clients; ++t) {
    threads.emplace_back([&, t] {
      bool ready = rdmad_connect(srv.path().c_str(), &conns[t]) == RDMAD_OK &&
                   rdmad_alloc_host(static_cast<size_t>(each) * kPage, &bufs[t]) == RDMAD_OK;
      line.arrive_and_wait();
      if (!ready) {
        other += each;
        return;
      }
      for (int k = 0; k < each; ++k) {
        rdmad_mr* mr = nullptr;
        rdmad_status s = rdmad_register_host(conns[t], bufs[t].fd, k * kPage, kPage, kRw, 0, &mr);
        if (s == RDMAD_OK)
          ++ok;
        else if (s != RDMAD_ERR_QUOTA)
          ++other;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(other.load(), 0);
  EXPECT_EQ(srv.on_server([&] { return srv.server().service().usage(clients::Tenant::of_uid(::geteuid())).registrations; }),
            static_cast<uint32_t>(ok.load()));
  EXPECT_EQ(srv.handle_count(), static_cast<size_t>(ok.load()));
  for (int t = 0; t < clients; ++t) {
    if (conns[t] != nullptr) rdmad_disconnect(conns[t]);
    rdmad_free_host(&bufs[t]);
  }
  EXPECT_TRUE(eventually([&] { return srv.handle_count() == 0; }));
  return ok.load();
}

TEST(IpcWorkers, RegistrationCountQuotaHoldsAcrossWorkers) {
  TestServer srv(with_workers(4, clients::Quota{uint64_t{1} << 30, 24}));
  EXPECT_EQ(race_for_quota(srv, 8, 6), 24);
  EXPECT_EQ(srv.metric("rdmad_client_requests_total", {{"op", "register_host"}, {"result", "quota"}}), 24.0);
}

TEST(IpcWorkers, PinnedBytesQuotaHoldsAcrossWorkers) {
  TestServer srv(with_workers(4, clients::Quota{10 * kPage, 4096}));
  EXPECT_EQ(race_for_quota(srv, 8, 3), 10);
}

TEST(IpcWorkers, ClientDyingMidRequestLeavesOthersServedAndIsCleanedUp) {
  TestServer srv(with_workers(2));
  size_t fds_before = open_fd_count();
  constexpr int kSteady = 4, kVictims = 12, kVictimPages = 16;
  std::atomic<bool> stop{false};
  std::atomic<int> failures{0}, pairs{0};
  std::vector<rdmad_client*> steady(kSteady);
  std::vector<rdmad_host_buffer> steady_bufs(kSteady);
  for (int t = 0; t < kSteady; ++t) {
    ASSERT_EQ(rdmad_connect(srv.path().c_str(), &steady[t]), RDMAD_OK);
    ASSERT_EQ(rdmad_alloc_host(2 * kPage, &steady_bufs[t]), RDMAD_OK);
    rdmad_mr* held = nullptr;  // stays registered throughout
    ASSERT_EQ(rdmad_register_host(steady[t], steady_bufs[t].fd, 0, kPage, kRw, 0, &held), RDMAD_OK);
  }
  std::vector<std::thread> threads;
  for (int t = 0; t < kSteady; ++t) {
    threads.emplace_back([&, t] {
      while (!stop.load()) {
        rdmad_mr* mr = nullptr;
        if (rdmad_register_host(steady[t], steady_bufs[t].fd, kPage, kPage, kRw, 0, &mr) != RDMAD_OK ||
            rdmad_deregister(steady[t], mr) != RDMAD_OK)
          ++failures;
        ++pairs;
      }
    });
  }
  rdmad_host_buffer victim_buf;
  ASSERT_EQ(rdmad_alloc_host(kVictimPages * kPage, &victim_buf), RDMAD_OK);
  for (int v = 0; v < kVictims; ++v) {  // round-robin: the victims land on both workers
    RawClient raw(srv.path());
    ASSERT_TRUE(raw.hello());
    for (int k = 0; k < kVictimPages; ++k) {
      proto::RegisterHostRequest req{static_cast<uint64_t>(k) * kPage, kPage, kRw, 0};
      ASSERT_TRUE(raw.send(proto::MsgType::kRegisterHost, req, 10 + k, {victim_buf.fd}));
      RawReply r = raw.receive();
      ASSERT_EQ(r.header.type, proto::reply_type(proto::MsgType::kRegisterHost)) << r.message();
    }
    // A last request whose reply nobody reads: the socket closes under the server's feet.
    proto::RegisterHostRequest last{0, 2 * kPage, kRw, 0};
    ASSERT_TRUE(raw.send(proto::MsgType::kRegisterHost, last, 99, {victim_buf.fd}));
  }
  rdmad_free_host(&victim_buf);
  // Every victim's registrations go; the steady clients' held ones stay (plus at most one pair each in
  // flight).
  EXPECT_TRUE(eventually([&] { return srv.handle_count() <= kSteady * 2 && srv.client_count() == kSteady; },
                         std::chrono::seconds(5)));
  int before = pairs.load();
  EXPECT_TRUE(eventually([&] { return pairs.load() > before + 100; }, std::chrono::seconds(5)));
  stop = true;
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(srv.handle_count(), size_t{kSteady});
  EXPECT_EQ(srv.region_count(), size_t{kSteady});
  for (int t = 0; t < kSteady; ++t) {
    rdmad_disconnect(steady[t]);
    rdmad_free_host(&steady_bufs[t]);
  }
  EXPECT_TRUE(eventually([&] { return srv.region_count() == 0 && open_fd_count() == fds_before; }));
  EXPECT_EQ(srv.on_server([&] { return srv.registrar().live_regions(); }), 0u);
}

TEST(IpcWorkers, ControlThreadRequestsStayInOrderWithWorkerRequests) {
  TestServer srv(with_workers(2));
  rdmad_host_buffer buf;
  ASSERT_EQ(rdmad_alloc_host(4 * kPage, &buf), RDMAD_OK);
  RawClient raw(srv.path());
  ASSERT_TRUE(raw.hello());
  using proto::MsgType;
  // Pipelined without reading: worker, control, worker, control, ... each reply in request order.
  std::vector<MsgType> sent;
  for (uint64_t i = 0; i < 4; ++i) {
    ASSERT_TRUE(raw.send(MsgType::kRegisterHost, proto::RegisterHostRequest{i * kPage, kPage, kRw, 0},
                         100 + 3 * i, {buf.fd}));
    ASSERT_TRUE(raw.send_empty(MsgType::kQueryNics, 101 + 3 * i));
    ASSERT_TRUE(raw.send(MsgType::kListRegistrations, proto::ListRequest{0, 16, 0}, 102 + 3 * i));
    sent.insert(sent.end(), {MsgType::kRegisterHost, MsgType::kQueryNics, MsgType::kListRegistrations});
  }
  for (uint64_t i = 0; i < sent.size(); ++i) {
    RawReply r = raw.receive();
    ASSERT_FALSE(r.closed);
    EXPECT_EQ(r.header.request_id, 100 + i);
    EXPECT_EQ(r.header.type, proto::reply_type(sent[i])) << r.message();
    if (sent[i] == MsgType::kListRegistrations) {
      proto::ListReply head{};
      ASSERT_GE(r.body.size(), sizeof(head));
      std::memcpy(&head, r.body.data(), sizeof(head));
      EXPECT_EQ(head.count, i / 3 + 1);  // every registration sent before it is listed
    }
  }
  rdmad_free_host(&buf);
}

}  // namespace
}  // namespace rdmad::test
