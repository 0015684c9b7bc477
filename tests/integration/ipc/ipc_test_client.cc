// A client process for the process-level tests. Modes:
//   churn SOCKET         register 8 x 1 MiB, print "ready", then register/deregister forever
//   as-nobody SOCKET H   drop to uid/gid 65534, hello, try to deregister handle H, list;
//                        prints "connect=<status> hello=<status> deregister=<status> list=<count>"
#include <grp.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "rdmad/rdmad.h"
#include "unit/clients/raw_client.h"

namespace {

int churn(const char* path) {
  rdmad_client* c = nullptr;
  if (rdmad_connect(path, &c) != RDMAD_OK) return 2;
  rdmad_host_buffer buf;
  if (rdmad_alloc_host(16u << 20, &buf) != RDMAD_OK) return 3;
  const uint32_t rw = RDMAD_ACCESS_LOCAL_WRITE | RDMAD_ACCESS_REMOTE_WRITE;
  for (uint64_t i = 0; i < 8; ++i) {
    rdmad_mr* mr = nullptr;
    if (rdmad_register_host(c, buf.fd, i << 20, 1u << 20, rw, 0, &mr) != RDMAD_OK) return 4;
  }
  std::printf("ready\n");
  std::fflush(stdout);
  for (uint64_t i = 0;; ++i) {
    rdmad_mr* mr = nullptr;
    if (rdmad_register_host(c, buf.fd, (8u << 20) + (i % 2048) * 4096, 4096, rw, 0, &mr) != RDMAD_OK)
      return 5;
    if (i % 2 == 0 && rdmad_deregister(c, mr) != RDMAD_OK) return 6;  // odd ones pile up
  }
}

int as_nobody(const char* path, uint64_t handle) {
  if (setgroups(0, nullptr) != 0 || setresgid(65534, 65534, 65534) != 0 ||
      setresuid(65534, 65534, 65534) != 0) {
    std::perror("drop privileges");
    return 2;
  }
  // Through the library first: a refusal must surface as RDMAD_ERR_PERMISSION from rdmad_connect.
  rdmad_client* client = nullptr;
  int connect_status = rdmad_connect(path, &client);
  rdmad_disconnect(client);
  using rdmad::proto::MsgType;
  rdmad::test::RawClient raw(path);
  if (!raw.connected()) {
    std::printf("hello=connect-failed\n");
    return 0;
  }
  raw.send(MsgType::kHello, rdmad::proto::HelloRequest{1, 1, 0}, 1);
  auto hello = raw.receive();
  int hello_status = hello.header.type == rdmad::proto::reply_type(MsgType::kHello) ? 0 : hello.status();
  int dereg_status = -1;
  uint32_t listed = 0;
  if (hello_status == 0) {
    raw.send(MsgType::kDeregister, rdmad::proto::DeregisterRequest{handle}, 2);
    dereg_status = raw.receive().status();
    raw.send(MsgType::kListRegistrations, rdmad::proto::ListRequest{0, 64, 0}, 3);
    auto list = raw.receive();
    if (list.body.size() >= sizeof(rdmad::proto::ListReply))
      std::memcpy(&listed, list.body.data(), sizeof(listed));
  }
  std::printf("connect=%d hello=%d deregister=%d list=%u\n", connect_status, hello_status, dereg_status, listed);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 3 && std::strcmp(argv[1], "churn") == 0) return churn(argv[2]);
  if (argc >= 4 && std::strcmp(argv[1], "as-nobody") == 0)
    return as_nobody(argv[2], std::strtoull(argv[3], nullptr, 10));
  std::fprintf(stderr, "usage: ipc_test_client churn SOCKET | as-nobody SOCKET HANDLE\n");
  return 1;
}
