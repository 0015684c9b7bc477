// Sessions that survive a restart: the state file (SessionStore) and taking a session back over
// the socket (kResume, kQueryRegistration), with who may take it.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <set>

#include <gtest/gtest.h>

#include "raw_client.h"
#include "rdmad/daemon/clients/session_store.h"
#include "server_fixture.h"

namespace rdmad::test {
namespace {

using clients::RestoredState;
using clients::SessionStore;
using clients::StoredExport;
using clients::StoredHandle;
using clients::StoredSession;

// Records what the store asks a keeper to keep and forget (the descriptors themselves are closed).
class RecordingKeeper final : public clients::FdKeeper {
 public:
  explicit RecordingKeeper(std::set<std::string>* kept, std::vector<std::string>* forgotten)
      : kept_(kept), forgotten_(forgotten) {}
  bool keep(int, const std::string& name) override {
    kept_->insert(name);
    return true;
  }
  void forget(const std::string& name) override {
    kept_->erase(name);
    forgotten_->push_back(name);
  }

 private:
  std::set<std::string>* kept_;
  std::vector<std::string>* forgotten_;
};

int sealed_memfd(size_t bytes) {
  int fd = memfd_create("session-test", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  EXPECT_EQ(ftruncate(fd, static_cast<off_t>(bytes)), 0);
  EXPECT_EQ(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK), 0);
  return fd;
}

StoredSession session(uint64_t conn, uid_t uid, uint8_t tag) {
  StoredSession s{conn, uid, 100 + static_cast<pid_t>(conn), {}};
  s.token.fill(tag);
  return s;
}

StoredHandle handle(uint64_t h, uint64_t conn, uint64_t seq) {
  StoredHandle out;
  out.handle = h;
  out.conn_id = conn;
  out.region_seq = seq;
  out.kind = RDMAD_MEM_HOST;
  out.access = RDMAD_ACCESS_LOCAL_WRITE;
  out.length = 4096;
  return out;
}

// Descriptors named as the daemon's keeper names them, one memfd each.
std::map<std::string, int> passed(std::initializer_list<uint64_t> seqs) {
  std::map<std::string, int> out;
  for (uint64_t s : seqs) out["mem-" + std::to_string(s)] = sealed_memfd(4096);
  return out;
}

class SessionStoreTest : public ::testing::Test {
 protected:
  std::unique_ptr<SessionStore> store() {
    return std::make_unique<SessionStore>(dir_.path() + "/sessions.state",
                                          std::make_unique<RecordingKeeper>(&kept_, &forgotten_));
  }
  TempDir dir_;
  std::set<std::string> kept_;
  std::vector<std::string> forgotten_;
};

TEST_F(SessionStoreTest, ReplayGivesBackWhatIsLiveWithItsDescriptors) {
  {
    auto s = store();
    s->replay({});
    s->session_started(session(1, 1000, 0xa1));
    s->session_started(session(2, 1001, 0xa2));
    s->session_started(session(3, 1002, 0xa3));
    s->handle_added(handle(10, 1, s->next_region_seq()), 0);   // seq 1
    s->handle_added(handle(11, 1, s->next_region_seq()), 0);   // seq 2, dropped below
    s->handle_added(handle(12, 2, s->next_region_seq()), 0);   // seq 3, its session ends
    s->handle_added(handle(13, 3, s->next_region_seq()), 0);   // seq 4, session moved to conn 9
    s->handle_added(handle(99, 77, 5), 0);                     // no session: not recorded
    s->export_added({{0x55}, 1, 10, 0, 4096, RDMAD_ACCESS_REMOTE_WRITE, "peer-b"});
    s->export_added({{0x66}, 1, 10, 0, 4096, RDMAD_ACCESS_REMOTE_READ, "peer-c"});
    s->handle_dropped(11);
    s->session_ended(2);
    s->export_dropped({0x66});
    s->session_moved(3, session(9, 1002, 0xa3));
    EXPECT_EQ(kept_, (std::set<std::string>{"mem-1", "mem-2", "mem-3", "mem-4"}));
    s->freeze();
    s->session_ended(1);  // a stopping daemon releasing its clients: not recorded
  }
  auto s = store();
  RestoredState r = s->replay(passed({1, 2, 3, 4}));
  ASSERT_EQ(r.sessions.size(), 2u);
  EXPECT_EQ(r.sessions[0].conn_id, 1u);
  EXPECT_EQ(r.sessions[0].uid, 1000u);
  EXPECT_EQ(r.sessions[0].token[0], 0xa1);
  EXPECT_EQ(r.sessions[1].conn_id, 9u);
  ASSERT_EQ(r.handles.size(), 2u);
  EXPECT_EQ(r.handles[0].handle, 10u);
  EXPECT_EQ(r.handles[1].handle, 13u);
  EXPECT_EQ(r.handles[1].conn_id, 9u);
  ASSERT_EQ(r.exports.size(), 1u);
  EXPECT_EQ(r.exports[0].peer, "peer-b");
  EXPECT_EQ(r.exports[0].handle, 10u);
  EXPECT_EQ(r.max_handle, 13u);
  EXPECT_EQ(r.max_conn_id, 9u);
  // The descriptors of live regions come back; the others are closed and forgotten by the keeper.
  EXPECT_EQ(r.region_fds.size(), 2u);
  EXPECT_EQ(r.region_fds.count(1), 1u);
  EXPECT_EQ(r.region_fds.count(4), 1u);
  EXPECT_EQ(std::set<std::string>(forgotten_.begin(), forgotten_.end()), (std::set<std::string>{"mem-2", "mem-3"}));
  for (auto& [seq, fd] : r.region_fds) close(fd);
  EXPECT_GT(s->next_region_seq(), 4u);  // never a name the store still holds
}

TEST_F(SessionStoreTest, AHandleWhoseDescriptorDidNotComeBackIsNotRestored) {
  {
    auto s = store();
    s->replay({});
    s->session_started(session(1, 1000, 1));
    s->handle_added(handle(5, 1, s->next_region_seq()), 0);
    s->export_added({{0x11}, 1, 5, 0, 4096, RDMAD_ACCESS_REMOTE_WRITE, "b"});
  }
  // As after `systemctl stop`: the state file is there, the store was emptied.
  RestoredState r = store()->replay({});
  EXPECT_TRUE(r.sessions.empty());
  EXPECT_TRUE(r.handles.empty());
  EXPECT_TRUE(r.exports.empty());
  EXPECT_EQ(r.handles_without_fd, 1u);
}

TEST_F(SessionStoreTest, ATornTailEndsTheReplayAtTheLastWholeRecord) {
  {
    auto s = store();
    s->replay({});
    s->session_started(session(1, 1000, 1));
    s->handle_added(handle(5, 1, s->next_region_seq()), 0);
    s->handle_added(handle(6, 1, s->next_region_seq()), 0);
  }
  const std::string path = dir_.path() + "/sessions.state";
  struct stat st {};
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  ASSERT_EQ(truncate(path.c_str(), st.st_size - 3), 0);  // a kill in the middle of the last write
  RestoredState r = store()->replay(passed({1, 2}));
  ASSERT_EQ(r.handles.size(), 1u);
  EXPECT_EQ(r.handles[0].handle, 5u);
  EXPECT_GT(r.torn_bytes, 0u);
  for (auto& [seq, fd] : r.region_fds) close(fd);
}

TEST_F(SessionStoreTest, ChurnKeepsTheFileWithinTwiceWhatIsLive) {
  auto s = store();
  s->replay({});
  s->session_started(session(1, 1000, 1));
  for (uint64_t h = 1; h <= 50000; ++h) {
    s->handle_added(handle(h, 1, s->next_region_seq()), 0);
    if (h > 10) s->handle_dropped(h - 10);
  }
  // Ten handles are live: the file is rewritten whenever it passes 1 MiB and twice what is live.
  EXPECT_LT(s->bytes_written_for_test(), uint64_t{2} << 20);
  s->freeze();
  std::map<std::string, int> fds;
  for (uint64_t seq = 49991; seq <= 50000; ++seq) fds["mem-" + std::to_string(seq)] = sealed_memfd(4096);
  RestoredState r = store()->replay(std::move(fds));
  ASSERT_EQ(r.handles.size(), 10u);
  EXPECT_EQ(r.handles.front().handle, 49991u);
  for (auto& [seq, fd] : r.region_fds) close(fd);
}

// The server's half: a restored session is given only to a connection with its token and its uid.
class ResumeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = std::make_unique<SessionStore>(srv_.dir() + "/sessions.state", nullptr);
    store_->replay({});
    srv_.on_server([this] {
      srv_.server().set_session_store(store_.get());
      return 0;
    });
  }
  void TearDown() override {
    srv_.on_server([this] {
      srv_.server().set_session_store(nullptr);
      return 0;
    });
  }
  // A previous run's session of `uid` holding handle 42 over a 4 KiB memfd.
  size_t restore(uid_t uid) {
    RestoredState state;
    state.sessions.push_back(session(7, uid, 0x77));
    state.handles.push_back(handle(42, 7, 1));
    const int fd = sealed_memfd(4096);
    state.region_fds[1] = fd;
    state.max_handle = 42;
    state.max_conn_id = 7;
    const size_t n = srv_.on_server([&] { return srv_.server().restore(state, std::chrono::seconds(30)); });
    close(fd);
    return n;
  }
  proto::ResumeReply resume(RawClient& c, uint8_t tag) {
    proto::ResumeRequest req{};
    std::memset(req.session, tag, sizeof(req.session));
    EXPECT_TRUE(c.send(proto::MsgType::kResume, req, 2, {}, proto::kVersionSessions));
    RawReply r = c.receive();
    proto::ResumeReply out{};
    EXPECT_EQ(r.header.type, proto::reply_type(proto::MsgType::kResume));
    if (r.body.size() == sizeof(out)) std::memcpy(&out, r.body.data(), sizeof(out));
    return out;
  }
  TestServer srv_;
  std::unique_ptr<SessionStore> store_;
};

TEST_F(ResumeTest, TheTokensOwnerTakesTheSessionBackOnce) {
  ASSERT_EQ(restore(getuid()), 1u);
  auto owner = std::make_unique<RawClient>(srv_.path());
  RawClient& c = *owner;
  ASSERT_TRUE(c.hello(proto::kVersionSessions));
  EXPECT_EQ(resume(c, 0x78).resumed, 0u) << "a wrong token";
  const auto ok = resume(c, 0x77);
  EXPECT_EQ(ok.resumed, 1u);
  EXPECT_EQ(ok.handles, 1u);
  // The handle is this connection's now, with the keys the NICs gave it in this run.
  ASSERT_TRUE(c.send(proto::MsgType::kQueryRegistration, proto::QueryRegistrationRequest{42}, 3, {},
                     proto::kVersionSessions));
  RawReply q = c.receive();
  ASSERT_EQ(q.header.type, proto::reply_type(proto::MsgType::kQueryRegistration));
  proto::RegisterReply reg{};
  ASSERT_EQ(q.body.size(), sizeof(reg));
  std::memcpy(&reg, q.body.data(), sizeof(reg));
  EXPECT_EQ(reg.handle, 42u);
  EXPECT_EQ(reg.nic_count, 2u);
  // A second connection with the same token gets nothing.
  RawClient other(srv_.path());
  ASSERT_TRUE(other.hello(proto::kVersionSessions));
  EXPECT_EQ(resume(other, 0x77).resumed, 0u);
  // Taken back, the session ends with its new connection like any other.
  owner.reset();
  EXPECT_TRUE(eventually([&] { return srv_.handle_count() == 0; }));
}

TEST_F(ResumeTest, AnotherUidsTokenIsRefusedAsUnknown) {
  ASSERT_EQ(restore(getuid() + 12345), 1u);
  RawClient c(srv_.path());
  ASSERT_TRUE(c.hello(proto::kVersionSessions));
  EXPECT_EQ(resume(c, 0x77).resumed, 0u);
  EXPECT_EQ(srv_.handle_count(), 1u);  // still waiting for its owner
}

TEST_F(ResumeTest, VersionOneConnectionsCannotResume) {
  ASSERT_EQ(restore(getuid()), 1u);
  RawClient c(srv_.path());
  ASSERT_TRUE(c.hello());
  proto::ResumeRequest req{};
  std::memset(req.session, 0x77, sizeof(req.session));
  ASSERT_TRUE(c.send(proto::MsgType::kResume, req, 2));
  RawReply r = c.receive();
  EXPECT_EQ(r.header.type, static_cast<uint16_t>(proto::MsgType::kError));
  EXPECT_EQ(r.status(), RDMAD_ERR_VERSION);
}

}  // namespace
}  // namespace rdmad::test
