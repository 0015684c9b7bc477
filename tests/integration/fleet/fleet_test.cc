// 32 rdmad daemons, each in its own network namespace with two rails through two bridges
// (fleet_net.h), peers authenticated with the cluster's pre-shared key, found through static
// [[peers]] lists or DNS (fleet_config.h). Every node reaches the other 31; 64 random pairs (seeded,
// printed) move byte-exact data through librdmad flows at once; one node is removed (its daemon
// killed, its DNS record deleted) and added back: the others see it go within the keepalive /
// re-resolve bound, its flows fail with an error, not a hang, and new flows to it are byte-exact
// once it is back. Prints the fleet's figures (docs/testing.md, "The fleet test"). Needs root.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include <fmt/ranges.h>

#include "fleet_config.h"
#include "fleet_figures.h"
#include "fleet_net.h"
#include "integration/flow/flow_cluster.h"
#include "rdmad/admin.h"

namespace rdmad::test::fleet {
namespace {

constexpr int kNodes = 32;
constexpr int kPairs = 64;

size_t env_or(const char* name, size_t fallback) {
  const char* v = std::getenv(name);
  return v != nullptr ? std::strtoull(v, nullptr, 0) : fallback;
}

std::string node_id(int i) { return fmt::format("node-{:02}", i); }

// The daemon's count of peers whose sessions carry traffic (what `rdmactl status` prints as
// "peers: N known, M ready"), through the admin request on the node's admin socket; -1 when the
// daemon does not answer.
int peers_ready(Node& n) {
  rdmad_client* admin_client = nullptr;
  if (rdmad_connect(admin::default_admin_socket(n.socket_path()).c_str(), &admin_client) != RDMAD_OK) return -1;
  std::vector<std::byte> reply;
  const rdmad_status st = admin::call(admin_client, proto::MsgType::kStatus, {}, &reply);
  rdmad_disconnect(admin_client);
  if (st != RDMAD_OK || reply.size() < sizeof(proto::StatusReply)) return -1;
  proto::StatusReply s;
  std::memcpy(&s, reply.data(), sizeof s);
  return static_cast<int>(s.peers_ready);
}

// The daemons, their network and every flow the test opens, torn down in that order's reverse:
// flows, then daemons (and the test's connections to them), then namespaces and dnsmasq.
struct Fleet {
  Discovery mode = discovery_mode();
  FleetNet net{kNodes};
  std::vector<std::unique_ptr<Node>> nodes{kNodes};
  std::vector<std::vector<rdmad_flow*>> mesh{kNodes, std::vector<rdmad_flow*>(kNodes, nullptr)};

  ~Fleet() { close_flows_of(-1); }
  void close_flows_of(int node) {
    for (int a = 0; a < kNodes; ++a)
      for (int b = 0; b < kNodes; ++b)
        if (node < 0 || a == node) {
          rdmad_flow_close(mesh[a][b]);
          mesh[a][b] = nullptr;
        }
  }
  bool start(int i) {
    NodeSpec spec{node_id(i),
                  {NicSpec{FleetNet::address(i, 0), 4791, ""}, NicSpec{FleetNet::address(i, 1), 4791, ""}},
                  extra_tables(mode, i, kNodes),
                  "",
                  14,
                  net.in_node(i),
                  FleetNet::address(i, 0),
                  peer_keys(mode)};
    nodes[i] = std::make_unique<Node>(std::move(spec), kPeerPort);
    return nodes[i]->start({});
  }
  pid_t pid(int i) { return nodes[i]->process()->pid(); }
  // Opens a's flow to b (if it has none) and waits for it to connect; false at the deadline.
  bool connect(int a, int b, Clock::time_point end) {
    if (mesh[a][b] == nullptr && rdmad_flow_open(nodes[a]->client(), node_id(b).c_str(), nullptr, &mesh[a][b]) != RDMAD_OK)
      return false;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - Clock::now()).count();
    return rdmad_flow_wait_connected(mesh[a][b], static_cast<int>(std::max<long>(left, 1))) == RDMAD_OK;
  }
};

// One transfer from a to b: a's buffer written into b's through a's flow to b.
struct Transfer {
  int a, b;
  std::unique_ptr<Buffer> src, dst;
  rdmad_remote remote{};
  std::optional<rdmad_completion> done;
};

Transfer prepare(Fleet& f, int a, int b, size_t bytes, uint64_t seed) {
  Transfer t{a, b, std::make_unique<Buffer>(f.nodes[a]->client(), bytes, kAllAccess),
             std::make_unique<Buffer>(f.nodes[b]->client(), bytes, kAllAccess), rdmad_remote{}, std::nullopt};
  fill(t.src->data(), bytes, seed);
  fill(t.dst->data(), bytes, seed + 1);
  t.remote = export_and_import(*f.nodes[b], *t.dst, bytes, *f.nodes[a], f.mesh[a][b]);
  return t;
}

// Posts every transfer's write at once, then polls them all until each completed or `deadline`.
void run(Fleet& f, std::vector<Transfer>& ts, size_t bytes, std::chrono::milliseconds deadline) {
  for (size_t i = 0; i < ts.size(); ++i)
    EXPECT_EQ(rdmad_flow_write(f.mesh[ts[i].a][ts[i].b], i, ts[i].src->mr, 0, &ts[i].remote, 0, bytes), RDMAD_OK);
  const auto end = Clock::now() + deadline;
  for (size_t left = ts.size(); left > 0 && Clock::now() < end;) {
    Transfer* pending = nullptr;
    for (auto& t : ts) {
      if (t.done) continue;
      rdmad_completion c{};
      if (rdmad_flow_poll(f.mesh[t.a][t.b], &c, 1) == 1) {
        t.done = c;
        --left;
      } else if (pending == nullptr) {
        pending = &t;
      }
    }
    if (pending != nullptr) rdmad_flow_wait(f.mesh[pending->a][pending->b], 5);
  }
}

void expect_byte_exact(const std::vector<Transfer>& ts, size_t bytes) {
  for (const auto& t : ts) {
    ASSERT_TRUE(t.done.has_value()) << node_id(t.a) << " -> " << node_id(t.b) << " did not complete";
    EXPECT_EQ(t.done->status, RDMAD_OK) << node_id(t.a) << " -> " << node_id(t.b);
    EXPECT_EQ(first_difference(t.src->data(), t.dst->data(), bytes), -1) << node_id(t.a) << " -> " << node_id(t.b);
  }
}

std::vector<std::pair<int, int>> random_pairs(std::mt19937_64& rng, int count) {
  std::vector<std::pair<int, int>> pairs;
  std::uniform_int_distribution<int> node(0, kNodes - 1);
  while (pairs.size() < static_cast<size_t>(count)) {
    const std::pair<int, int> p{node(rng), node(rng)};
    if (p.first != p.second && std::find(pairs.begin(), pairs.end(), p) == pairs.end()) pairs.push_back(p);
  }
  return pairs;
}

// True once every node but `skip` (-1: none) has reported `ready` peers, within the deadline.
bool all_ready(Fleet& f, int ready, int skip, std::chrono::milliseconds deadline) {
  std::vector<bool> seen(kNodes, false);
  if (skip >= 0) seen[skip] = true;
  return eventually(
      [&] {
        for (int i = 0; i < kNodes; ++i)
          if (!seen[i]) seen[i] = peers_ready(*f.nodes[i]) == ready;
        return std::all_of(seen.begin(), seen.end(), [](bool s) { return s; });
      },
      deadline);
}

TEST(Fleet, ThirtyTwoNodesReachEachOtherMoveDataAndSurviveANodeLeaving) {
  Fleet f;
  if (f.mode == Discovery::kDns &&
      !Subprocess({binary("daemon/rdmad"), "--print-config-doc"}).wait_for_output("| `discover` |", 5s))
    GTEST_SKIP() << "this rdmad has no [peer] discover: DNS discovery is not merged yet";
  std::string why;
  if (!f.net.create(&why)) GTEST_SKIP() << why;
  const uint64_t seed = env_or("RDMAD_FLEET_SEED", std::random_device{}());
  const size_t bytes = env_or("RDMAD_FLEET_BYTES", size_t{8} << 20);
  std::mt19937_64 rng(seed);
  Figures fig(name(f.mode), kNodes, seed, bytes);
  std::printf("fleet: mode=%s seed=%llu (RDMAD_FLEET_SEED=%llu reproduces the pairs and the removed node)\n",
              name(f.mode), static_cast<unsigned long long>(seed), static_cast<unsigned long long>(seed));

  // Start: 32 daemons, one after another; in static mode they dial the ones already there.
  const auto t_start = Clock::now();
  for (int i = 0; i < kNodes; ++i) ASSERT_TRUE(f.start(i)) << node_id(i);
  fig.started_s = seconds_since(t_start);
  for (int i = 0; i < kNodes; ++i) fig.at_start[i] = sample(f.pid(i));

  // Reach: static sessions come up by themselves; then every node opens a flow to every other
  // (in dns mode that flow is what opens the session) and each must connect.
  if (f.mode == Discovery::kStatic) {
    ASSERT_TRUE(all_ready(f, kNodes - 1, -1, 90s)) << "sessions did not all come up";
    fig.sessions_up_s = seconds_since(t_start);
  }
  const auto t_mesh = Clock::now();
  for (int a = 0; a < kNodes; ++a)
    for (int b = 0; b < kNodes; ++b)
      if (a != b) {
        ASSERT_TRUE(f.connect(a, b, t_mesh + 90s)) << node_id(a) << " cannot reach " << node_id(b);
      }
  fig.mesh_s = seconds_since(t_mesh);
  if (f.mode == Discovery::kDns) fig.sessions_up_s = seconds_since(t_start);
  fig.measure_idle([&](int i) { return f.pid(i); });
  // 32 idle daemons share two cores: none may spin (measured: about 0.13 cores for the fleet).
  EXPECT_LT(fig.idle_fleet_cores(), 0.5) << "the idle fleet spins";

  // Transfers: 64 distinct random pairs at once.
  {
    std::vector<Transfer> ts;
    std::string listed;
    for (const auto& [a, b] : random_pairs(rng, kPairs)) {
      ts.push_back(prepare(f, a, b, bytes, ts.size() * 2 + 1));
      listed += fmt::format(" {}>{}", a, b);
    }
    fig.pairs = kPairs;
    std::printf("fleet: pairs (a>b: a writes into b):%s\n", listed.c_str());
    const auto t0 = Clock::now();
    run(f, ts, bytes, 180s);
    fig.transfers_s = seconds_since(t0);
    expect_byte_exact(ts, bytes);
  }
  for (int i = 0; i < kNodes; ++i) fig.after_transfers[i] = sample(f.pid(i));

  // Removal: writes in flight both ways, then the daemon is killed and its record deleted.
  const int gone = std::uniform_int_distribution<int>(0, kNodes - 1)(rng);
  const int to = (gone + 1) % kNodes, from = (gone + 2) % kNodes;
  const size_t inflight_bytes = bytes * 8;
  std::vector<Transfer> into_gone, out_of_gone;
  into_gone.push_back(prepare(f, from, gone, inflight_bytes, 101));
  out_of_gone.push_back(prepare(f, gone, to, inflight_bytes, 103));
  for (auto* ts : {&into_gone, &out_of_gone})
    ASSERT_EQ(rdmad_flow_write(f.mesh[(*ts)[0].a][(*ts)[0].b], 7, (*ts)[0].src->mr, 0, &(*ts)[0].remote, 0, inflight_bytes),
              RDMAD_OK);
  const auto t_kill = Clock::now();
  f.nodes[gone]->process()->signal(SIGKILL);
  ASSERT_TRUE(f.nodes[gone]->process()->wait_exit(10s).has_value());
  f.net.set_record(gone, false);
  // The removed daemon's own client: its request completes with DAEMON_GONE (or OK if it finished).
  const auto own = wait_completion(f.mesh[gone][to], 10s);
  ASSERT_TRUE(own.has_value()) << "a flow of the killed daemon hangs";
  EXPECT_TRUE(own->status == RDMAD_OK || own->status == RDMAD_ERR_DAEMON_GONE) << own->status;
  // The others: every one of them sees it go, within the bound.
  ASSERT_TRUE(all_ready(f, kNodes - 2, gone, std::chrono::milliseconds(notice_bound_ms(f.mode))))
      << "not every node noticed " << node_id(gone) << " leave within " << notice_bound_ms(f.mode) << " ms";
  fig.notice_ms = seconds_since(t_kill) * 1000;
  // The flow into it: the request in flight completes (an error unless it had finished), and a new
  // one fails at once instead of hanging.
  const auto into = wait_completion(f.mesh[from][gone], std::chrono::milliseconds(notice_bound_ms(f.mode)));
  ASSERT_TRUE(into.has_value()) << "a write to the removed node hangs";
  EXPECT_TRUE(into->status == RDMAD_OK || into->status == RDMAD_ERR_PEER) << into->status;
  fig.inflight_status = {own->status, into->status};
  const rdmad_status again = rdmad_flow_write(f.mesh[from][gone], 8, into_gone[0].src->mr, 0, &into_gone[0].remote, 0, 4096);
  if (again == RDMAD_OK) {
    const auto c = wait_completion(f.mesh[from][gone], 5s);
    ASSERT_TRUE(c.has_value()) << "a write posted while the node is gone hangs";
    EXPECT_EQ(c->status, RDMAD_ERR_PEER);
  } else {
    EXPECT_EQ(again, RDMAD_ERR_PEER);
  }
  EXPECT_NE(rdmad_flow_wait_connected(f.mesh[(gone + 3) % kNodes][gone], 200), RDMAD_OK);
  std::vector<std::string> resolved;
  ASSERT_TRUE(eventually(
      [&] {
        resolved = f.net.resolve(to, kServiceName);
        return resolved.size() == kNodes - 1 &&
               std::find(resolved.begin(), resolved.end(), FleetNet::address(gone, 0)) == resolved.end();
      },
      10s))
      << kServiceName << " still resolves to " << fmt::format("{}", fmt::join(resolved, " ")) << "\n"
      << f.net.dns_log();
  into_gone.clear();
  out_of_gone.clear();
  f.close_flows_of(gone);
  f.nodes[gone]->kill();

  // Back: record added, daemon started again; everyone reaches it and it reaches everyone.
  f.net.set_record(gone, true);
  const auto t_back = Clock::now();
  ASSERT_TRUE(f.start(gone));
  for (int o = 0; o < kNodes; ++o) {
    if (o == gone) continue;
    ASSERT_TRUE(f.connect(o, gone, t_back + 60s)) << node_id(o) << " does not reach " << node_id(gone) << " again";
    ASSERT_TRUE(f.connect(gone, o, t_back + 60s)) << node_id(gone) << " does not reach " << node_id(o) << " again";
  }
  fig.rejoin_s = seconds_since(t_back);
  std::vector<Transfer> back;
  back.push_back(prepare(f, from, gone, bytes, 201));
  back.push_back(prepare(f, gone, to, bytes, 203));
  run(f, back, bytes, 60s);
  expect_byte_exact(back, bytes);
  fig.print();
}

}  // namespace
}  // namespace rdmad::test::fleet
