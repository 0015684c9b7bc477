// The operator's requests against a client of the node's client socket (docs/security.md, "Tenants
// and the operator"): root in a pod that mounts the client socket, or any other local user, cannot
// list other tenants' registrations or retune the NIC through it, and reaching the admin socket
// itself takes the daemon's uid or root, whatever the file modes say.
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "rdmad/admin.h"
#include "rdmad/protocol.h"
#include "security/local_users.h"

namespace rdmad::security {
namespace {

rdmad_status list_all(rdmad_client* c) {
  proto::ListRequest req{0, proto::kMaxRegistrationListEntries, 0};
  std::vector<std::byte> reply;
  return admin::call(c, proto::MsgType::kListAllRegistrations, {reinterpret_cast<const std::byte*>(&req), sizeof req},
                     &reply);
}

// As nobody: 0 when every step was refused, else the step that got through.
int attack(const std::string& client_socket, const std::string& admin_socket) {
  if (::setresgid(kNobody, kNobody, kNobody) != 0 || ::setresuid(kNobody, kNobody, kNobody) != 0) return 100;
  rdmad_client* c = nullptr;
  if (rdmad_connect(client_socket.c_str(), &c) != RDMAD_OK) return 101;  // the client socket is open to all
  if (list_all(c) != RDMAD_ERR_ADMIN_SOCKET) return 1;
  rdmad_disconnect(c);
  rdmad_client* a = nullptr;
  if (rdmad_connect(admin_socket.c_str(), &a) == RDMAD_OK) {
    const rdmad_status st = list_all(a);
    rdmad_disconnect(a);
    if (st == RDMAD_OK) return 2;
  }
  return 0;
}

TEST(AdminSocket, ClientsOfTheClientSocketAreNoOperatorsNotEvenRoot) {
  test::Node node(open_node("node-a", 46), test::free_port(SOCK_STREAM));
  ASSERT_TRUE(node.start({}));
  open_to_others(node.socket_path());
  test::Buffer victim(node.client(), 1 << 20, test::kAllAccess);
  const std::string admin_socket = admin::default_admin_socket(node.socket_path());

  // Root on the client socket (root in a pod that mounts it): refused, with the way to the admin socket.
  EXPECT_EQ(list_all(node.client()), RDMAD_ERR_ADMIN_SOCKET) << rdmad_last_error(node.client());
  EXPECT_NE(std::string(rdmad_last_error(node.client())).find(admin_socket), std::string::npos)
      << rdmad_last_error(node.client());

  // Another user, with the admin socket's modes opened wide: the daemon's credential check holds.
  ASSERT_EQ(::chmod(std::filesystem::path(admin_socket).parent_path().c_str(), 0777), 0);
  ASSERT_EQ(::chmod(admin_socket.c_str(), 0777), 0);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) ::_exit(attack(node.socket_path(), admin_socket));
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the attacker got through at step " << WEXITSTATUS(status) << "\n"
                                    << node.output();

  // The operator still is one, on the admin socket.
  rdmad_client* op = nullptr;
  ASSERT_EQ(rdmad_connect(admin_socket.c_str(), &op), RDMAD_OK);
  EXPECT_EQ(list_all(op), RDMAD_OK) << rdmad_last_error(op);
  rdmad_disconnect(op);
}

}  // namespace
}  // namespace rdmad::security
