// The application side of the systemd guest test's restart check (tests/vm): one client of the
// guest's rdmad that stays connected while systemd restarts the daemon, as a training job would.
//
//   vm_session_client SOCKET FLAG_FILE [BYTES]
//       Registers BYTES (default 4 MiB) of host memory filled with a pattern and prints
//       "report: session registered handle=H", then waits (at most 120 s) for FLAG_FILE to exist:
//       the test restarts rdmad meanwhile. Then it asks the daemon for its registrations (the call
//       that reconnects and takes the session back) and prints "report: session after restart
//       handle=H lost=L count=N ms=T", T the milliseconds from seeing the flag to that answer.
//       Exit 0 when the daemon holds the same handle for it, not lost, and the memory still holds
//       the pattern; 1 otherwise (the reason on stderr).
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "rdmad/rdmad.h"
#include "support/fill_pattern.h"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: vm_session_client SOCKET FLAG_FILE [BYTES]\n");
    return 2;
  }
  const size_t bytes = argc > 3 ? std::strtoull(argv[3], nullptr, 10) : size_t{4} << 20;
  rdmad_client* client = nullptr;
  if (rdmad_connect(argv[1], &client) != RDMAD_OK) {
    std::fprintf(stderr, "vm_session_client: connect: %s\n", rdmad_last_error(nullptr));
    return 1;
  }
  rdmad_set_reconnect_timeout_ms(client, 30000);  // systemd's restart, not a dead daemon
  rdmad_host_buffer buf{};
  rdmad_mr* mr = nullptr;
  if (rdmad_alloc_host(bytes, &buf) != RDMAD_OK) return 1;
  rdmad::test::fill(static_cast<uint8_t*>(buf.addr), bytes, 5);
  if (rdmad_register_host(client, buf.fd, 0, bytes, RDMAD_ACCESS_LOCAL_WRITE, 0, &mr) != RDMAD_OK) {
    std::fprintf(stderr, "vm_session_client: register: %s\n", rdmad_last_error(client));
    return 1;
  }
  const uint64_t handle = rdmad_mr_handle(mr);
  std::printf("report: session registered handle=%llu\n", static_cast<unsigned long long>(handle));
  std::fflush(stdout);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  struct stat st {};
  while (::stat(argv[2], &st) != 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      std::fprintf(stderr, "vm_session_client: no %s within 120 s\n", argv[2]);
      return 1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // a file the test writes, not a wait for the daemon
  }
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<rdmad_registration_info> regs(8);
  size_t count = 0;
  const rdmad_status s = rdmad_list_registrations(client, regs.data(), regs.size(), &count);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (s != RDMAD_OK) {
    std::fprintf(stderr, "vm_session_client: list after the restart: %s\n", rdmad_last_error(client));
    return 1;
  }
  std::printf("report: session after restart handle=%llu lost=%d count=%zu ms=%.0f\n",
              static_cast<unsigned long long>(count > 0 ? regs[0].handle : 0), rdmad_mr_is_lost(mr), count, ms);
  std::vector<uint8_t> want(bytes);
  rdmad::test::fill(want.data(), bytes, 5);
  const bool same = count == 1 && regs[0].handle == handle && rdmad_mr_is_lost(mr) == 0 &&
                    std::memcmp(want.data(), buf.addr, bytes) == 0;
  if (!same) std::fprintf(stderr, "vm_session_client: the session did not survive the restart\n");
  rdmad_deregister(client, mr);
  rdmad_free_host(&buf);
  rdmad_disconnect(client);
  return same ? 0 : 1;
}
