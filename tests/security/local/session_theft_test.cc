// Another local user against a session waiting to be taken back after a restart (docs/operations.md,
// "Restarts that keep registrations"): it cannot read the state file that holds the tokens, no
// token it makes up takes the session, it cannot reach the session's handles, and the owner then
// takes its session back untouched.
#include <fcntl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>

#include "rdmad/protocol.h"
#include "security/local_users.h"

namespace rdmad::security {
namespace {

// One request and its reply on a raw connection; the reply's header type and body, or false.
bool transact(int fd, uint16_t version, proto::MsgType type, const void* body, size_t n, uint16_t* reply_type,
              std::vector<char>* reply) {
  std::vector<char> frame(sizeof(proto::Header) + n);
  const proto::Header h = proto::make_header(version, static_cast<uint16_t>(type), static_cast<uint32_t>(n), 1);
  std::memcpy(frame.data(), &h, sizeof h);
  std::memcpy(frame.data() + sizeof h, body, n);
  if (::send(fd, frame.data(), frame.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(frame.size())) return false;
  std::vector<char> buf(proto::kMaxFrameBytes);
  const ssize_t got = ::recv(fd, buf.data(), buf.size(), 0);
  if (got < static_cast<ssize_t>(sizeof(proto::Header))) return false;
  proto::Header rh;
  std::memcpy(&rh, buf.data(), sizeof rh);
  *reply_type = rh.type;
  reply->assign(buf.begin() + sizeof rh, buf.begin() + got);
  return true;
}

// The attacker, as uid kNobody in a child process. Exit codes name what it managed: 0 nothing.
int attack(const std::string& socket_path, const std::string& state_file, uint64_t victim_handle) {
  if (::setgid(kNobody) != 0 || ::setuid(kNobody) != 0) return 10;
  if (::open(state_file.c_str(), O_RDONLY) >= 0) return 11;  // the tokens are in there
  int fd = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", socket_path.c_str());
  timeval tv{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) return 12;
  uint16_t type = 0;
  std::vector<char> reply;
  const proto::HelloRequest hello{proto::kVersionMin, proto::kVersionSessions, 0};
  if (!transact(fd, proto::kVersionMin, proto::MsgType::kHello, &hello, sizeof hello, &type, &reply) ||
      reply.size() != sizeof(proto::HelloReplyV2))
    return 13;
  for (int i = 0; i < 200; ++i) {
    proto::ResumeRequest req{};
    if (::getrandom(req.session, sizeof req.session, 0) != sizeof req.session) return 14;
    if (i == 0) std::memset(req.session, 0, sizeof req.session);  // the all-zero token too
    if (!transact(fd, proto::kVersionSessions, proto::MsgType::kResume, &req, sizeof req, &type, &reply) ||
        type != proto::reply_type(proto::MsgType::kResume) || reply.size() != sizeof(proto::ResumeReply))
      return 15;
    proto::ResumeReply r;
    std::memcpy(&r, reply.data(), sizeof r);
    if (r.resumed != 0) return 16;
  }
  const proto::QueryRegistrationRequest q{victim_handle};
  if (!transact(fd, proto::kVersionSessions, proto::MsgType::kQueryRegistration, &q, sizeof q, &type, &reply))
    return 17;
  if (type != static_cast<uint16_t>(proto::MsgType::kError)) return 18;  // it reached the victim's handle
  ::close(fd);
  return 0;
}

TEST(SessionTheft, AnotherUserCannotTakeOrReachASessionWaitingAfterARestart) {
  test::NodeSpec spec = open_node("node-s", 45);
  spec.supervised = true;
  test::Node node(std::move(spec), test::free_port(SOCK_STREAM));
  ASSERT_TRUE(node.start({}));
  open_to_others(node.socket_path());
  test::Buffer victim(node.client(), 1 << 20, test::kAllAccess);
  const uint64_t handle = rdmad_mr_handle(victim.mr);
  ASSERT_TRUE(node.restart());  // the session now waits for its owner

  const std::string state = std::filesystem::path(node.socket_path()).parent_path() / "sessions.state";
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) ::_exit(attack(node.socket_path(), state, handle));
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the attacker got as far as step " << WEXITSTATUS(status) << "\n"
                                    << node.output();

  rdmad_registration_info regs[4];
  size_t count = 0;
  ASSERT_EQ(rdmad_list_registrations(node.client(), regs, 4, &count), RDMAD_OK) << rdmad_last_error(node.client());
  ASSERT_EQ(count, 1u) << node.output();
  EXPECT_EQ(regs[0].handle, handle);
  EXPECT_EQ(rdmad_mr_is_lost(victim.mr), 0);
}

}  // namespace
}  // namespace rdmad::security
