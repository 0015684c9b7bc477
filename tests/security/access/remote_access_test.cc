// Remote access is exactly what was exported. A real rdmad (the victim) with one soft NIC; two
// peer daemons played by the test (RoguePeer): mallory, which a victim's client exports 4 KiB
// write-only to, and carol, which gets another range. Mallory then tries everything it was not
// given — beyond its range, other rights, the registration's own keys, carol's keys, keys near its
// own and random ones, and its own key after the revoke — and the victim's memory must be
// byte-for-byte what the one allowed WRITE made of it. And a send-done (peer protocol 6: an RC
// SEND on a lane into the victim's mailbox) completes only a receive advertised to the peer that
// sends it.
#include <sys/random.h>

#include <gtest/gtest.h>

#include <random>

#include "integration/flow/flow_cluster.h"
#include "rogue_peer.h"

namespace rdmad::security {
namespace {

using test::Buffer;
using test::Node;
using test::NodeSpec;
using test::NicSpec;
using namespace std::chrono_literals;

constexpr size_t kBytes = 1 << 20;
constexpr uint64_t kMalloryOffset = 64 << 10;
constexpr uint64_t kCarolOffset = 128 << 10;
constexpr uint32_t kExport = 4096;

std::string write_key_file(const test::TempDir& dir) {
  uint8_t key[32];
  EXPECT_EQ(getrandom(key, sizeof key, 0), static_cast<ssize_t>(sizeof key));
  std::string hex;
  for (uint8_t b : key) hex += fmt::format("{:02x}", b);
  const std::string path = dir.write("peer.key", hex + "\n");
  EXPECT_EQ(chmod(path.c_str(), 0600), 0);
  return path;
}

uint8_t pattern(size_t i) { return static_cast<uint8_t>(i * 131 + 7); }

class RemoteAccess : public ::testing::Test {
 protected:
  void SetUp() override {
    key_file_ = write_key_file(dir_);
    victim_ = std::make_unique<Node>(NodeSpec{"victim", {NicSpec{"127.0.0.1", 0, ""}}, "", key_file_, 10, {}, "127.0.0.1"},
                                     test::free_port(SOCK_STREAM));
    ASSERT_TRUE(victim_->start({}));
    mallory_ = std::make_unique<RoguePeer>("mallory", "victim", victim_->peer_port(), key_file_);
    carol_ = std::make_unique<RoguePeer>("carol", "victim", victim_->peer_port(), key_file_);
    ASSERT_TRUE(mallory_->started()) << mallory_->start_error();
    ASSERT_TRUE(carol_->started()) << carol_->start_error();
    ASSERT_TRUE(mallory_->wait_ready(20s)) << victim_->output();
    ASSERT_TRUE(carol_->wait_ready(20s)) << victim_->output();

    buf_ = std::make_unique<Buffer>(victim_->client(), kBytes, test::kAllAccess);
    for (size_t i = 0; i < kBytes; ++i) buf_->data()[i] = pattern(i);
    ASSERT_EQ(rdmad_export(victim_->client(), buf_->mr, kMalloryOffset, kExport, "mallory", RDMAD_ACCESS_REMOTE_WRITE,
                           &mallory_token_),
              RDMAD_OK)
        << rdmad_last_error(victim_->client());
    ASSERT_EQ(rdmad_export(victim_->client(), buf_->mr, kCarolOffset, kExport, "carol",
                           RDMAD_ACCESS_REMOTE_WRITE | RDMAD_ACCESS_REMOTE_READ, &carol_token_),
              RDMAD_OK)
        << rdmad_last_error(victim_->client());
    ASSERT_EQ(mallory_->grants().size(), 1u);
    ASSERT_EQ(carol_->grants().size(), 1u);
    mine_ = mallory_->grants()[0];
    carols_ = carol_->grants()[0];
    ASSERT_EQ(mine_.keys.size(), 1u);
    ASSERT_EQ(carols_.keys.size(), 1u);
    ASSERT_EQ(mine_.length, kExport);
    ASSERT_EQ(mine_.iova, rdmad_mr_iova(buf_->mr) + kMalloryOffset);
  }

  // The victim's memory: the pattern everywhere but where the allowed WRITE put `written`.
  void expect_memory(bool written, uint8_t fill) {
    for (size_t i = 0; i < kBytes; ++i) {
      const bool in = written && i >= kMalloryOffset && i < kMalloryOffset + kExport;
      const uint8_t want = in ? fill : pattern(i);
      ASSERT_EQ(buf_->data()[i], want) << "byte " << i << " of the victim's registration was changed by a peer";
    }
  }

  // Opens the victim's flow to carol (into *flow) and posts a receive of dst's kExport bytes (0x11
  // each) on it; returns what carol was told of it.
  peer::RecvPost receive_for_carol(rdmad_flow** flow, Buffer& dst, uint64_t wr_id) {
    EXPECT_EQ(rdmad_flow_open(victim_->client(), "carol", nullptr, flow), RDMAD_OK) << rdmad_last_error(victim_->client());
    EXPECT_EQ(rdmad_flow_wait_connected(*flow, 10000), RDMAD_OK);
    std::memset(dst.data(), 0x11, kExport);
    EXPECT_EQ(rdmad_flow_recv(*flow, wr_id, dst.mr, 0, kExport), RDMAD_OK);
    EXPECT_TRUE(RoguePeer::poll_until([&] { return carol_->recv_posts().size() == 1; }, 10s)) << victim_->output();
    return carol_->recv_posts().empty() ? peer::RecvPost{} : carol_->recv_posts()[0];
  }
  // Polls until the victim has counted `n` refused send-dones or the receive completed; the test
  // fails when neither happens, or when it completed.
  void expect_refused_not_completed(rdmad_flow* flow, const Buffer& dst, double n, const char* what) {
    rdmad_completion c{};
    bool completed = false;
    ASSERT_TRUE(RoguePeer::poll_until(
        [&] {
          completed = completed || rdmad_flow_poll(flow, &c, 1) == 1;
          return completed || victim_->metric(kRefused).value_or(0) >= n;
        },
        10s))
        << victim_->output();
    EXPECT_FALSE(completed) << what;
    EXPECT_EQ(dst.data()[0], 0x11);
  }
  // Carol's fill completes the receive with carol's kExport bytes (0x77 each).
  void expect_filled_by_carol(rdmad_flow* flow, const Buffer& dst, uint64_t wr_id) {
    rdmad_completion c{};
    ASSERT_TRUE(RoguePeer::poll_until([&] { return rdmad_flow_poll(flow, &c, 1) == 1; }, 10s)) << victim_->output();
    EXPECT_EQ(c.wr_id, wr_id);
    EXPECT_EQ(c.status, RDMAD_OK);
    EXPECT_EQ(c.length, kExport);
    for (size_t i = 0; i < kExport; ++i) ASSERT_EQ(dst.data()[i], 0x77) << "byte " << i;
  }
  static constexpr const char* kRefused = "rdmad_peer_messages_refused_total{kind=\"send_done\"}";

  test::TempDir dir_;
  std::string key_file_;
  std::unique_ptr<Node> victim_;
  std::unique_ptr<RoguePeer> mallory_;
  std::unique_ptr<RoguePeer> carol_;
  std::unique_ptr<Buffer> buf_;
  rdmad_token mallory_token_{};
  rdmad_token carol_token_{};
  peer::Grant mine_;
  peer::Grant carols_;
};

TEST_F(RemoteAccess, OnlyTheExportedRangeWithTheGrantedRightsIsReachable) {
  const uint32_t key = mine_.keys[0].rkey;
  const uint64_t va = mine_.iova;
  // The one thing mallory was given works.
  ASSERT_EQ(mallory_->write(va, key, kExport, 0xA5), verbs::WcStatus::kSuccess);
  expect_memory(true, 0xA5);

  struct Probe {
    const char* what;
    bool read;
    uint64_t va;
    uint32_t key;
    uint32_t len;
  };
  rdmad_nic_key reg{};
  ASSERT_EQ(rdmad_mr_key(buf_->mr, 0, &reg), RDMAD_OK);
  const uint64_t reg_va = rdmad_mr_iova(buf_->mr);
  std::vector<Probe> probes = {
      {"write past the end", false, va + kExport, key, kExport},
      {"write before the start", false, va - kExport, key, kExport},
      {"write across the end", false, va + kExport - 100, key, 200},
      {"read of a write-only export", true, va, key, kExport},
      {"write with the registration's own key", false, reg_va, reg.rkey, kExport},
      {"read with the registration's own key", true, reg_va, reg.rkey, kExport},
      {"read with the registration's lkey", true, reg_va, reg.lkey, kExport},
      {"write with carol's key", false, carols_.iova, carols_.keys[0].rkey, kExport},
      {"read with carol's key", true, carols_.iova, carols_.keys[0].rkey, kExport},
  };
  for (int d = -16; d <= 16; ++d)
    if (d != 0) probes.push_back({"write with a key near its own", false, va, key + static_cast<uint32_t>(d), kExport});
  for (int b = 0; b < 32; ++b) probes.push_back({"write with one bit of its key flipped", false, va, key ^ (1u << b), kExport});
  std::mt19937 rng(12345);
  for (int i = 0; i < 24; ++i) {
    const uint32_t k = static_cast<uint32_t>(rng());
    probes.push_back({"write with a random key", false, va, k, kExport});
    probes.push_back({"read with a random key", true, reg_va + (rng() % (kBytes - kExport)), k, kExport});
  }
  for (const Probe& p : probes) {
    const verbs::WcStatus st = p.read ? mallory_->read(p.va, p.key, p.len) : mallory_->write(p.va, p.key, p.len, 0x5A);
    EXPECT_NE(st, verbs::WcStatus::kSuccess) << p.what << " (key 0x" << std::hex << p.key << ", va 0x" << p.va
                                             << ") reached the victim's memory";
    if (p.read) {
      // Nothing of the victim's arrived in our buffer.
      EXPECT_NE(std::memcmp(mallory_->buffer(), buf_->data() + (p.va - reg_va) % kBytes, 64), 0) << p.what;
    }
  }
  expect_memory(true, 0xA5);

  // After the revoke returns, its own key is refused too.
  ASSERT_EQ(rdmad_revoke(victim_->client(), &mallory_token_), RDMAD_OK);
  EXPECT_NE(mallory_->write(va, key, kExport, 0x3C), verbs::WcStatus::kSuccess) << "the revoked export was written";
  expect_memory(true, 0xA5);
  // Carol's grant still works for carol, on her own QPs.
  EXPECT_EQ(carol_->write(carols_.iova, carols_.keys[0].rkey, kExport, 0x77), verbs::WcStatus::kSuccess);
  EXPECT_EQ(buf_->data()[kCarolOffset], 0x77);
}

// The victim's client posts a receive on its flow to carol. Mallory learns everything carol was
// told (channel, receive id, length) and SENDs carol's send-done for it on its own lane, between
// two malformed ones: the victim's NIC takes both into its mailbox, and its engine completes nothing
// (the receive is carol's) and refuses the malformed one, counted. Carol then fills the receive
// and sends the same done: that one completes it, with carol's bytes. (With the engine not
// checking which peer a done came from, mallory's completed carol's receive.)
TEST_F(RemoteAccess, ASendDoneOnALaneCompletesOnlyAReceiveAdvertisedToThatPeer) {
  rdmad_flow* flow = nullptr;
  Buffer dst(victim_->client(), kExport, test::kAllAccess);
  const peer::RecvPost post = receive_for_carol(&flow, dst, 42);
  ASSERT_EQ(post.length, kExport);
  ASSERT_EQ(post.keys.size(), 1u);
  EXPECT_TRUE(mallory_->recv_posts().empty());
  const peer::SendDone done{.channel = post.channel, .recv_id = post.recv_id, .bytes = kExport, .status = 0};

  const std::vector<uint8_t> malformed = {1, 2, 3, 4, 5};
  ASSERT_EQ(mallory_->send_on_lane(malformed), verbs::WcStatus::kSuccess);
  ASSERT_EQ(mallory_->send_on_lane(peer::encode_mail(done)), verbs::WcStatus::kSuccess);
  ASSERT_EQ(mallory_->send_on_lane(malformed), verbs::WcStatus::kSuccess);
  // One QP, in order: once the second malformed one is counted, the forged one was handled.
  expect_refused_not_completed(flow, dst, 2, "mallory's send-done completed carol's receive");

  ASSERT_EQ(carol_->write(post.iova, post.keys[0].rkey, kExport, 0x77), verbs::WcStatus::kSuccess);
  ASSERT_EQ(carol_->send_on_lane(peer::encode_mail(done)), verbs::WcStatus::kSuccess);
  expect_filled_by_carol(flow, dst, 42);
  EXPECT_EQ(victim_->metric(kRefused).value_or(0), 2.0);
  rdmad_flow_close(flow);
}

// The same with an RDMA WRITE with immediate, which completes a receive without a send-done
// (peer protocol 7). Mallory writes into the memory the victim granted it with the
// immediate of carol's receive: the data lands in mallory's grant, the immediate is refused and
// counted, and carol's receive stays pending until carol's own WRITE with immediate fills it.
// (With the engine not checking the sending peer, mallory's completed carol's receive with no
// bytes of carol's in it.)
TEST_F(RemoteAccess, AWriteWithImmediateCompletesOnlyAReceiveAdvertisedToThatPeer) {
  rdmad_flow* flow = nullptr;
  Buffer dst(victim_->client(), kExport, test::kAllAccess);
  const peer::RecvPost post = receive_for_carol(&flow, dst, 43);
  ASSERT_EQ(post.keys.size(), 1u);
  // The immediate the victim's own peers would send for that receive: its slot (low 20 bits of
  // the receive id) and the low 12 bits of its generation (the high half).
  const auto imm = static_cast<uint32_t>(post.recv_id) | static_cast<uint32_t>(post.recv_id >> 32) << 20;

  ASSERT_EQ(mallory_->write_with_imm(mine_.iova, mine_.keys[0].rkey, 64, 0x66, imm), verbs::WcStatus::kSuccess);
  expect_refused_not_completed(flow, dst, 1, "mallory's immediate completed carol's receive");
  EXPECT_EQ(buf_->data()[kMalloryOffset], 0x66) << "mallory's data went into its grant";

  ASSERT_EQ(carol_->write_with_imm(post.iova, post.keys[0].rkey, kExport, 0x77, imm), verbs::WcStatus::kSuccess);
  expect_filled_by_carol(flow, dst, 43);
  EXPECT_EQ(victim_->metric(kRefused).value_or(0), 1.0);
  rdmad_flow_close(flow);
}

// Receive advertisements on a lane (peer protocol 8) give their sender credits for the victim's
// sends to it, nothing else, and only in their session and once each. Mallory SENDs lane mail
// advertising a receive: one of another session number is refused and counted, and the same
// advertisement twice is taken once (the second counted as a duplicate). Mailbox memory is local
// access only, so none of it reaches the victim's memory (checked as in every test here).
TEST_F(RemoteAccess, ALaneAdvertisementCountsOnlyInItsSessionAndOnce) {
  static constexpr const char* kCredit = "rdmad_peer_messages_refused_total{kind=\"receive_credit\"}";
  static constexpr const char* kDuplicate = "rdmad_flow_recv_posts_duplicate_total";
  const uint32_t session = mallory_->session();
  ASSERT_NE(session, 0u);
  peer::RecvPost post{.session = session + 1, .seq = 0, .channel = 5, .owner_uid = 0, .recv_id = 1,
                      .iova = 0x1000, .length = 4096, .keys = {{0, 0x1234}}};
  ASSERT_EQ(mallory_->send_on_lane(peer::encode_mail(post)), verbs::WcStatus::kSuccess);
  ASSERT_TRUE(RoguePeer::poll_until([&] { return victim_->metric(kCredit).value_or(0) >= 1; }, 10s))
      << victim_->output();
  post.session = session;
  ASSERT_EQ(mallory_->send_on_lane(peer::encode_mail(post)), verbs::WcStatus::kSuccess);
  ASSERT_EQ(mallory_->send_on_lane(peer::encode_mail(post)), verbs::WcStatus::kSuccess);
  ASSERT_TRUE(RoguePeer::poll_until([&] { return victim_->metric(kDuplicate).value_or(0) >= 1; }, 10s))
      << victim_->output();
  EXPECT_EQ(victim_->metric(kCredit).value_or(0), 1.0) << "the advertisement of this session was refused";
  EXPECT_EQ(victim_->metric(kDuplicate).value_or(0), 1.0);
  expect_memory(false, 0);
}

TEST_F(RemoteAccess, KeysOfOneRegistrationDifferBetweenPeers) {
  // The same memory exported to two peers: two MRs in two protection domains, two keys, and each
  // peer's key is worthless on the other's QPs.
  rdmad_token t2{};
  ASSERT_EQ(rdmad_export(victim_->client(), buf_->mr, kCarolOffset, kExport, "mallory", RDMAD_ACCESS_REMOTE_WRITE, &t2),
            RDMAD_OK);
  ASSERT_EQ(mallory_->grants().size(), 2u);
  const peer::Grant second = mallory_->grants()[1];
  EXPECT_EQ(second.iova, carols_.iova);
  EXPECT_NE(second.keys[0].rkey, carols_.keys[0].rkey);
  EXPECT_NE(carol_->write(second.iova, second.keys[0].rkey, kExport, 0x11), verbs::WcStatus::kSuccess);
  EXPECT_NE(mallory_->write(carols_.iova, carols_.keys[0].rkey, kExport, 0x22), verbs::WcStatus::kSuccess);
  expect_memory(false, 0);
  EXPECT_EQ(mallory_->write(second.iova, second.keys[0].rkey, kExport, 0x33), verbs::WcStatus::kSuccess);
  EXPECT_EQ(buf_->data()[kCarolOffset], 0x33);
}

}  // namespace
}  // namespace rdmad::security

namespace rdmad::security {
namespace {

// Peers that never bring up queue pairs: what they send must not pile up in the victim.
class GrantLimits : public ::testing::Test {
 protected:
  void SetUp() override {
    key_file_ = write_key_file(dir_);
    victim_ = std::make_unique<Node>(
        NodeSpec{"victim", {NicSpec{"127.0.0.1", 0, ""}}, "[flow]\nmax_grants_per_peer = 64\n", key_file_, 10, {},
                 "127.0.0.1"},
        test::free_port(SOCK_STREAM));
    ASSERT_TRUE(victim_->start({}));
  }
  std::optional<double> held() const { return victim_->metric("rdmad_peer_grants_held"); }

  static peer::Grant grant_with(uint8_t tag, uint32_t i) {
    peer::Grant g;
    g.token.fill(tag);
    std::memcpy(g.token.data(), &i, sizeof i);
    g.iova = 0x10000;
    g.length = 4096;
    g.rights = RDMAD_ACCESS_REMOTE_WRITE;
    g.keys.push_back({0, 0x1234});
    return g;
  }

  test::TempDir dir_;
  std::string key_file_;
  std::unique_ptr<Node> victim_;
};

TEST_F(GrantLimits, AFloodIsRefusedBeyondTheLimitAndFreedWhenItsConnectionGoes) {
  RoguePeer flood("flood", "victim", static_cast<uint16_t>(victim_->peer_port()), key_file_, /*qps=*/false);
  ASSERT_TRUE(flood.started());
  ASSERT_TRUE(RoguePeer::poll_until([&] { return flood.connected(); }, 10s));
  constexpr uint32_t kSent = 500;
  for (uint32_t i = 0; i < kSent; ++i) flood.send(peer::MessageType::kGrant, peer::encode(grant_with(0xF0, i)));
  ASSERT_TRUE(RoguePeer::poll_until([&] { return flood.acks().size() == kSent; }, 10s)) << flood.acks().size();
  size_t stored = 0;
  for (const auto& a : flood.acks()) stored += a.status == 0;
  EXPECT_EQ(stored, 64u) << "grants stored beyond max_grants_per_peer";
  EXPECT_EQ(held(), 64);
  EXPECT_EQ(victim_->metric("rdmad_peer_messages_refused_total{kind=\"grant\"}"), double(kSent - 64));
  // The session never became ready; its grants go with its connection all the same.
  flood.hang_up();
  EXPECT_TRUE(test::eventually([&] { return held() == 0; }, 10s)) << "grants of a closed session kept: " << *held();
}

TEST_F(GrantLimits, APeerCannotReplaceAnotherPeersGrant) {
  RoguePeer carol("carol", "victim", static_cast<uint16_t>(victim_->peer_port()), key_file_, false);
  RoguePeer mallory("mallory", "victim", static_cast<uint16_t>(victim_->peer_port()), key_file_, false);
  ASSERT_TRUE(RoguePeer::poll_until([&] { return carol.connected() && mallory.connected(); }, 10s));
  const peer::Grant g = grant_with(0xC0, 1);
  carol.send(peer::MessageType::kGrant, peer::encode(g));
  ASSERT_TRUE(RoguePeer::poll_until([&] { return carol.acks().size() == 1; }, 10s));
  EXPECT_EQ(carol.acks()[0].status, 0u);
  peer::Grant stolen = g;
  stolen.keys[0].rkey = 0x9999;
  mallory.send(peer::MessageType::kGrant, peer::encode(stolen));
  ASSERT_TRUE(RoguePeer::poll_until([&] { return mallory.acks().size() == 1; }, 10s));
  EXPECT_NE(mallory.acks()[0].status, 0u) << "a grant naming another peer's token was stored";
  EXPECT_EQ(held(), 1);
  // Mallory's connection going does not take carol's grant with it.
  ASSERT_EQ(victim_->metric("rdmad_peers_connected"), 2);
  mallory.hang_up();
  ASSERT_TRUE(test::eventually([&] { return victim_->metric("rdmad_peers_connected") == 1; }, 10s));
  EXPECT_EQ(held(), 1);
}

}  // namespace
}  // namespace rdmad::security
