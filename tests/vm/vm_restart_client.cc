// The application side of the systemd guest test's restart-mid-transfer check (tests/vm): one
// process that is a client of two daemons in the guest — `a`, rdmad.service under systemd, which
// the test restarts, and `b`, a second rdmad beside it — and keeps writing through a flow from a to
// b while systemd restarts a, as a training job would.
//
//   vm_restart_client SOCKET_A SOCKET_B MARK_FILE [BYTES]
//       Registers BYTES (default 8 MiB) on each daemon (a's filled with a pattern, b's zeroed), b
//       exports its buffer to node "a", and a flow from a to node "b" imports it. Then it WRITEs the
//       whole buffer in 256 KiB requests, 8 in flight, pass after pass; after the first pass it
//       creates MARK_FILE (the test restarts rdmad then) and goes on. A request that fails with an
//       error a restart gives (RDMAD_ERR_DAEMON_GONE, RDMAD_ERR_PEER) is posted again on the same
//       rdmad_flow and rdmad_remote (the library rebinds the flow). It stops after the first full
//       pass that began after the restart was seen, and checks b's buffer byte for byte.
//       Prints "report: ..." lines: the retries, the gap from the first failure to the first
//       completed write on the restarted daemon, the registration kept.
//       Exit 0 when the restart was seen, every byte arrived, and a's registration kept its handle
//       and was not lost; 1 otherwise (the reason on stderr). Gives up after 120 s.
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <string>
#include <thread>
#include <vector>

#include "rdmad/rdmad.h"
#include "support/fill_pattern.h"

namespace {

using Clock = std::chrono::steady_clock;
constexpr uint64_t kChunk = 256 << 10;
constexpr size_t kWindow = 8;

int fail(const char* what, rdmad_client* c) {
  std::fprintf(stderr, "vm_restart_client: %s: %s\n", what, rdmad_last_error(c));
  return 1;
}

struct Side {
  rdmad_client* client = nullptr;
  rdmad_host_buffer buf{};
  rdmad_mr* mr = nullptr;
};

bool open_side(const char* socket, size_t bytes, int pattern, Side* s) {
  if (rdmad_connect(socket, &s->client) != RDMAD_OK) {
    fail(socket, nullptr);
    return false;
  }
  rdmad_set_reconnect_timeout_ms(s->client, 30000);  // systemd's restart, not a dead daemon
  if (rdmad_alloc_host(bytes, &s->buf) != RDMAD_OK) {
    fail("alloc", s->client);
    return false;
  }
  if (pattern >= 0)
    rdmad::test::fill(static_cast<uint8_t*>(s->buf.addr), bytes, static_cast<uint8_t>(pattern));
  else
    std::memset(s->buf.addr, 0, bytes);
  const uint32_t access = RDMAD_ACCESS_LOCAL_WRITE | RDMAD_ACCESS_REMOTE_WRITE;
  if (rdmad_register_host(s->client, s->buf.fd, 0, bytes, access, 0, &s->mr) != RDMAD_OK)
    {
    fail("register", s->client);
    return false;
  }
  return true;
}

bool retryable(rdmad_status s) { return s == RDMAD_ERR_DAEMON_GONE || s == RDMAD_ERR_PEER; }

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: vm_restart_client SOCKET_A SOCKET_B MARK_FILE [BYTES]\n");
    return 2;
  }
  const size_t bytes = argc > 4 ? std::strtoull(argv[4], nullptr, 10) : size_t{8} << 20;
  const size_t chunks = bytes / kChunk;
  if (chunks == 0 || bytes % kChunk != 0) {
    std::fprintf(stderr, "vm_restart_client: BYTES must be a multiple of %llu\n",
                 static_cast<unsigned long long>(kChunk));
    return 2;
  }
  Side a, b;
  if (!open_side(argv[1], bytes, 6, &a) || !open_side(argv[2], bytes, -1, &b)) return 1;
  const uint64_t handle = rdmad_mr_handle(a.mr);
  rdmad_token token{};
  if (rdmad_export(b.client, b.mr, 0, bytes, "a", RDMAD_ACCESS_REMOTE_WRITE, &token) != RDMAD_OK)
    return fail("export from b to a", b.client);
  rdmad_flow* flow = nullptr;
  if (rdmad_flow_open(a.client, "b", nullptr, &flow) != RDMAD_OK) return fail("flow open", a.client);
  if (rdmad_flow_wait_connected(flow, 30000) != RDMAD_OK) return fail("flow to b", a.client);
  rdmad_remote remote{};
  if (rdmad_flow_import(flow, &token, &remote) != RDMAD_OK) return fail("import", a.client);
  std::printf("report: restart client ready: %zu MiB, flow a -> b, handle=%llu\n", bytes >> 20,
              static_cast<unsigned long long>(handle));
  std::fflush(stdout);

  const auto deadline = Clock::now() + std::chrono::seconds(120);
  size_t passes = 0, retried = 0, gone = 0, peer = 0;
  bool marked = false, restarted = false;
  Clock::time_point first_failure{}, back{};
  size_t passes_after = 0;
  while (passes_after == 0 || !restarted) {
    if (Clock::now() > deadline) {
      std::fprintf(stderr, "vm_restart_client: no full pass after a restart within 120 s (restart seen: %d)\n",
                   restarted);
      return 1;
    }
    const bool began_after = restarted;
    std::deque<size_t> todo;
    for (size_t c = 0; c < chunks; ++c) todo.push_back(c);
    size_t in_flight = 0;
    while (!todo.empty() || in_flight > 0) {
      if (Clock::now() > deadline) break;
      while (!todo.empty() && in_flight < kWindow) {
        const size_t c = todo.front();
        const rdmad_status s = rdmad_flow_write(flow, c, a.mr, c * kChunk, &remote, c * kChunk, kChunk);
        if (s == RDMAD_ERR_NO_RESOURCE) break;
        if (retryable(s)) {  // the rebind found no daemon, or no peer, yet: try again
          if (first_failure == Clock::time_point{}) first_failure = Clock::now();
          restarted = true;
          break;
        }
        if (s != RDMAD_OK) return fail("write", a.client);
        todo.pop_front();
        ++in_flight;
      }
      rdmad_completion done[kWindow];
      const size_t n = rdmad_flow_poll(flow, done, kWindow);
      if (n == 0 && in_flight > 0) rdmad_flow_wait(flow, 100);
      for (size_t i = 0; i < n; ++i) {
        --in_flight;
        if (done[i].status == RDMAD_OK) {
          if (restarted && back == Clock::time_point{}) back = Clock::now();
          continue;
        }
        if (!retryable(done[i].status)) {
          std::fprintf(stderr, "vm_restart_client: chunk %llu: %s\n", static_cast<unsigned long long>(done[i].wr_id),
                       rdmad_strerror(done[i].status));
          return 1;
        }
        (done[i].status == RDMAD_ERR_DAEMON_GONE ? gone : peer) += 1;
        ++retried;
        if (first_failure == Clock::time_point{}) first_failure = Clock::now();
        restarted = true;
        todo.push_back(done[i].wr_id);  // the same request again, same flow, same remote
      }
    }
    ++passes;
    if (began_after) ++passes_after;
    if (!marked) {
      const int fd = ::open(argv[3], O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
      if (fd < 0) return fail("mark file", nullptr);
      ::close(fd);
      marked = true;
    }
    // Pacing the workload (a job computes between its transfers), so that the guest's one CPU
    // also runs the restarting daemon.
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::vector<uint8_t> want(bytes);
  rdmad::test::fill(want.data(), bytes, 6);
  const bool exact = std::memcmp(want.data(), b.buf.addr, bytes) == 0;
  rdmad_registration_info regs[4];
  size_t count = 0;
  const bool kept = rdmad_list_registrations(a.client, regs, 4, &count) == RDMAD_OK && count == 1 &&
                    regs[0].handle == handle && rdmad_mr_is_lost(a.mr) == 0;
  const double gap_ms = std::chrono::duration<double, std::milli>(back - first_failure).count();
  std::printf("report: restart mid-transfer: %zu passes of %zu MiB (%zu after the restart), %zu requests retried "
              "(%zu DAEMON_GONE, %zu PEER), first failure to first write on the new daemon %.0f ms, flow state %d, "
              "registration handle=%llu kept=%d, byte-exact=%d\n",
              passes, bytes >> 20, passes_after, retried, gone, peer, gap_ms, rdmad_flow_get_state(flow),
              static_cast<unsigned long long>(handle), kept, exact);
  if (!exact) std::fprintf(stderr, "vm_restart_client: b's buffer differs from a's\n");
  if (!kept) std::fprintf(stderr, "vm_restart_client: a's registration did not survive the restart\n");
  rdmad_flow_close(flow);
  rdmad_disconnect(a.client);
  rdmad_disconnect(b.client);
  return exact && kept ? 0 : 1;
}
