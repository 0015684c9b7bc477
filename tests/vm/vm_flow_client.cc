// The client side of the daemon tests on rxe (tests/vm/guest/daemon_*.sh): one process per guest,
// each the client of its own guest's rdmad, through the public librdmad API only. The two coordinate
// through files in a directory both guests share (the harness's /mnt): the target writes its token
// there, the initiator the name of each phase it finished.
//
//   vm_flow_client target    --peer NODE --dir DIR --bytes N --recv M --expect-seed S
//       Registers N bytes filled with pattern 2 and exports them to NODE (write and read), writes the
//       token to DIR/token, opens a flow to NODE (channel 7) with one receive of M bytes posted, writes
//       DIR/target-ready. Then waits for the receive (pattern 3 expected) and for DIR/done, and checks
//       that the first half of its buffer holds pattern S and the second half still pattern 2.
//   vm_flow_client initiator --peer NODE --dir DIR --phase basic|cut|again --bytes N [--send M]
//                            [--seed S] [--cut-after K --cut "COMMAND"] [--request BYTES] [--done]
//       Imports DIR/token on a flow to NODE and runs one phase: `basic` WRITEs pattern S into the
//       remote first half, READs the remote second half back (pattern 2 expected) and SENDs M bytes
//       of pattern 3 on channel 7; `cut` and `again` WRITE pattern S into the first half in requests
//       of BYTES, several in flight (`cut` runs COMMAND after K requests completed: a rail cut
//       mid-transfer), then READ it back and compare. `bw` WRITEs pattern S into the first half
//       --rounds times, up to --window requests in flight, and prints each round's throughput as a
//       "report: " line (the perftest comparison, BENCHMARKS.md), then READs it back and compares.
//       --done writes DIR/done afterwards.
//
// Every wait has a deadline; a failure names what differed. Exit 0 when everything was byte-exact.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "rdmad/rdmad.h"
#include "support/fill_pattern.h"

namespace {

using Clock = std::chrono::steady_clock;
constexpr uint64_t kChannel = 7;
constexpr uint64_t kReadSeed = 2;
constexpr uint64_t kSendSeed = 3;

using rdmad::test::fill;  // sizes here are multiples of 8 bytes

// 0 when [p, p+n) equals pattern `seed` taken from `from` bytes into it; else prints the first
// difference and returns 1.
int compare(const char* what, const uint8_t* p, size_t n, uint64_t seed, size_t from, size_t total) {
  std::vector<uint8_t> want(total);
  fill(want.data(), total, seed);
  for (size_t i = 0; i < n; ++i) {
    if (p[i] != want[from + i]) {
      std::fprintf(stderr, "vm_flow_client: %s: byte %zu of %zu is 0x%02x, expected 0x%02x (pattern %llu)\n", what,
                   i, n, p[i], want[from + i], static_cast<unsigned long long>(seed));
      return 1;
    }
  }
  std::printf("vm_flow_client: %s: %zu bytes byte-exact\n", what, n);
  return 0;
}

int fail(const char* what, rdmad_status s, const rdmad_client* c) {
  const char* d = rdmad_last_error(c);
  std::fprintf(stderr, "vm_flow_client: %s failed: %s%s%s\n", what, rdmad_strerror(s), d && *d ? ": " : "",
               d ? d : "");
  return 1;
}

bool exists(const std::string& path) { return ::access(path.c_str(), F_OK) == 0; }

// Polls for a file every 20 ms until the deadline.
bool wait_file(const std::string& path, int timeout_s) {
  const auto end = Clock::now() + std::chrono::seconds(timeout_s);
  while (Clock::now() < end) {
    if (exists(path)) return true;
    ::usleep(20'000);
  }
  std::fprintf(stderr, "vm_flow_client: %s did not appear within %d s\n", path.c_str(), timeout_s);
  return false;
}

// Written whole, then renamed: the other guest never reads half a file.
bool write_file(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp);
    f << text;
    if (!f) return false;
  }
  return std::rename(tmp.c_str(), path.c_str()) == 0;
}

struct Options {
  std::string mode, peer, dir, phase = "basic", cut, socket = "/tmp/rdmad/run/rdmad.sock";
  uint64_t bytes = 4 << 20, recv = 64 << 10, send = 0, seed = 1, expect_seed = 1, request = 256 << 10;
  uint64_t rounds = 3, window = 4;
  int cut_after = -1, timeout_s = 60;
  bool done = false;
};

bool parse(int argc, char** argv, Options& o) {
  if (argc < 2) return false;
  o.mode = argv[1];
  std::map<std::string, std::string> kv;
  for (int i = 2; i < argc; ++i) {
    std::string k = argv[i];
    if (k == "--done") {
      o.done = true;
      continue;
    }
    if (i + 1 >= argc) return false;
    kv[k] = argv[++i];
  }
  auto num = [&](const char* k, uint64_t& v) {
    if (kv.count(k)) v = std::strtoull(kv[k].c_str(), nullptr, 0);
  };
  o.peer = kv["--peer"];
  o.dir = kv["--dir"];
  if (kv.count("--phase")) o.phase = kv["--phase"];
  if (kv.count("--cut")) o.cut = kv["--cut"];
  if (kv.count("--socket")) o.socket = kv["--socket"];
  num("--bytes", o.bytes);
  num("--recv", o.recv);
  num("--send", o.send);
  num("--seed", o.seed);
  num("--expect-seed", o.expect_seed);
  num("--request", o.request);
  num("--rounds", o.rounds);
  num("--window", o.window);
  if (kv.count("--cut-after")) o.cut_after = std::atoi(kv["--cut-after"].c_str());
  if (kv.count("--timeout")) o.timeout_s = std::atoi(kv["--timeout"].c_str());
  return !o.peer.empty() && !o.dir.empty() && (o.mode == "target" || o.mode == "initiator") && o.request > 0 &&
         o.window > 0;
}

struct Buffer {
  rdmad_client* client = nullptr;
  rdmad_host_buffer host{};
  rdmad_mr* mr = nullptr;
  ~Buffer() {
    if (mr != nullptr) rdmad_deregister(client, mr);
    if (host.addr != nullptr) rdmad_free_host(&host);
  }
  bool make(rdmad_client* c, uint64_t n) {
    client = c;
    if (rdmad_status s = rdmad_alloc_host(n, &host); s != RDMAD_OK) return !fail("rdmad_alloc_host", s, c);
    const uint32_t access = RDMAD_ACCESS_LOCAL_WRITE | RDMAD_ACCESS_REMOTE_WRITE | RDMAD_ACCESS_REMOTE_READ;
    if (rdmad_status s = rdmad_register_host(c, host.fd, 0, n, access, 0, &mr); s != RDMAD_OK)
      return !fail("rdmad_register_host", s, c);
    return true;
  }
  uint8_t* data() const { return static_cast<uint8_t*>(host.addr); }
};

// Waits for `n` completions in submission order (wr_ids first..first+n-1), each successful.
int complete(rdmad_flow* f, const Options& o, uint64_t first, uint64_t n, const char* what) {
  const auto end = Clock::now() + std::chrono::seconds(o.timeout_s);
  uint64_t got = 0;
  while (got < n) {
    if (Clock::now() > end) {
      std::fprintf(stderr, "vm_flow_client: %s: %llu of %llu completions within %d s (flow state %d)\n", what,
                   static_cast<unsigned long long>(got), static_cast<unsigned long long>(n), o.timeout_s,
                   rdmad_flow_get_state(f));
      return 1;
    }
    rdmad_completion c[16];
    const size_t k = rdmad_flow_poll(f, c, static_cast<size_t>(std::min<uint64_t>(16, n - got)));
    for (size_t i = 0; i < k; ++i) {
      if (c[i].status != RDMAD_OK) {
        std::fprintf(stderr, "vm_flow_client: %s: request %llu failed: %s\n", what,
                     static_cast<unsigned long long>(c[i].wr_id), rdmad_strerror(c[i].status));
        return 1;
      }
      if (c[i].wr_id != first + got) {
        std::fprintf(stderr, "vm_flow_client: %s: completion %llu, expected %llu\n", what,
                     static_cast<unsigned long long>(c[i].wr_id), static_cast<unsigned long long>(first + got));
        return 1;
      }
      ++got;
    }
    if (k == 0) rdmad_flow_wait(f, 100);
  }
  return 0;
}

rdmad_flow* open_flow(rdmad_client* c, const Options& o) {
  rdmad_flow_attr attr{};
  attr.channel = kChannel;
  rdmad_flow* f = nullptr;
  if (rdmad_status s = rdmad_flow_open(c, o.peer.c_str(), &attr, &f); s != RDMAD_OK) {
    fail("rdmad_flow_open", s, c);
    return nullptr;
  }
  if (rdmad_status s = rdmad_flow_wait_connected(f, o.timeout_s * 1000); s != RDMAD_OK) {
    fail("rdmad_flow_wait_connected", s, c);
    rdmad_flow_close(f);
    return nullptr;
  }
  return f;
}

int target(rdmad_client* c, const Options& o) {
  Buffer t, r;
  if (!t.make(c, o.bytes) || !r.make(c, o.recv)) return 1;
  fill(t.data(), o.bytes, kReadSeed);
  std::memset(r.data(), 0, o.recv);
  // Connected first: an export needs the peer's daemon to store the grant.
  rdmad_flow* f = open_flow(c, o);
  if (f == nullptr) return 1;
  rdmad_token token;
  char text[RDMAD_TOKEN_STRING_BYTES];
  int rc = 0;
  if (rdmad_status s = rdmad_export(c, t.mr, 0, o.bytes, o.peer.c_str(),
                                    RDMAD_ACCESS_REMOTE_WRITE | RDMAD_ACCESS_REMOTE_READ, &token);
      s != RDMAD_OK) {
    rc = fail("rdmad_export", s, c);
  } else if (rdmad_token_to_string(&token, text), (s = rdmad_flow_recv(f, 1, r.mr, 0, o.recv)) != RDMAD_OK) {
    rc = fail("rdmad_flow_recv", s, c);
  } else if (!write_file(o.dir + "/token", text) || !write_file(o.dir + "/target-ready", "1")) {
    std::fprintf(stderr, "vm_flow_client: cannot write to %s\n", o.dir.c_str());
    rc = 1;
  } else {
    std::printf("vm_flow_client: exported %llu bytes to %s as %s, receive of %llu bytes posted\n",
                static_cast<unsigned long long>(o.bytes), o.peer.c_str(), text,
                static_cast<unsigned long long>(o.recv));
    std::fflush(stdout);
    rc = complete(f, o, 1, 1, "receive");
    rc = rc || compare("received message", r.data(), o.recv, kSendSeed, 0, o.recv);
    // The initiator's phases take a while under TCG: wait for them generously.
    rc = rc || !wait_file(o.dir + "/done", 4 * o.timeout_s);
    rc = rc || compare("written half", t.data(), o.bytes / 2, o.expect_seed, 0, o.bytes / 2);
    rc = rc || compare("unwritten half", t.data() + o.bytes / 2, o.bytes - o.bytes / 2, kReadSeed, o.bytes / 2, o.bytes);
  }
  rdmad_flow_close(f);
  return rc;
}

// Posts requests of o.request bytes over [0, length) with up to o.window in flight; wr_ids from `first`.
int stream(rdmad_flow* f, const Options& o, bool write, const rdmad_mr* local, const rdmad_remote* remote,
           uint64_t length, uint64_t first, const char* what, int cut_after = -1) {
  const uint64_t n = (length + o.request - 1) / o.request;
  uint64_t posted = 0, done = 0;
  const auto end = Clock::now() + std::chrono::seconds(o.timeout_s);
  bool cut_done = false;
  while (done < n) {
    while (posted < n && posted - done < o.window) {
      const uint64_t off = posted * o.request;
      const uint64_t len = std::min(o.request, length - off);
      const rdmad_status s = write ? rdmad_flow_write(f, first + posted, local, off, remote, off, len)
                                   : rdmad_flow_read(f, first + posted, local, off, remote, off, len);
      if (s == RDMAD_ERR_NO_RESOURCE) break;
      if (s != RDMAD_OK) return fail(write ? "rdmad_flow_write" : "rdmad_flow_read", s, nullptr);
      ++posted;
    }
    const uint64_t before = done;
    if (int rc = complete(f, o, first + done, 1, what); rc != 0) return rc;
    done = before + 1;
    if (!cut_done && cut_after >= 0 && done == static_cast<uint64_t>(cut_after) && !o.cut.empty()) {
      cut_done = true;
      std::printf("vm_flow_client: %s: %llu of %llu requests done, running: %s\n", what,
                  static_cast<unsigned long long>(done), static_cast<unsigned long long>(n), o.cut.c_str());
      std::fflush(stdout);
      if (std::system(o.cut.c_str()) != 0) {
        std::fprintf(stderr, "vm_flow_client: '%s' failed\n", o.cut.c_str());
        return 1;
      }
    }
    if (Clock::now() > end) {
      std::fprintf(stderr, "vm_flow_client: %s: %llu of %llu requests within %d s\n", what,
                   static_cast<unsigned long long>(done), static_cast<unsigned long long>(n), o.timeout_s);
      return 1;
    }
  }
  return 0;
}

int initiator(rdmad_client* c, const Options& o) {
  if (!wait_file(o.dir + "/target-ready", o.timeout_s)) return 1;
  std::ifstream tf(o.dir + "/token");
  std::string text;
  tf >> text;
  rdmad_token token;
  if (rdmad_status s = rdmad_token_from_string(text.c_str(), &token); s != RDMAD_OK)
    return fail("rdmad_token_from_string", s, c);
  rdmad_flow* f = open_flow(c, o);
  if (f == nullptr) return 1;
  rdmad_remote remote;
  int rc = 0;
  const uint64_t half = o.bytes / 2;
  Buffer w, back;
  if (rdmad_status s = rdmad_flow_import(f, &token, &remote); s != RDMAD_OK) {
    rc = fail("rdmad_flow_import", s, c);
  } else if (remote.length != o.bytes) {
    std::fprintf(stderr, "vm_flow_client: the import is %llu bytes, expected %llu\n",
                 static_cast<unsigned long long>(remote.length), static_cast<unsigned long long>(o.bytes));
    rc = 1;
  } else if (!w.make(c, o.bytes) || !back.make(c, o.bytes)) {
    rc = 1;
  } else if (o.phase == "basic") {
    fill(w.data(), half, o.seed);
    std::memset(back.data(), 0, o.bytes);
    rc = stream(f, o, true, w.mr, &remote, half, 100, "write");
    // The second half, read from the remote's own pattern into the back buffer at the same offset.
    if (rc == 0) {
      const rdmad_status st = rdmad_flow_read(f, 200, back.mr, half, &remote, half, o.bytes - half);
      rc = st != RDMAD_OK ? fail("rdmad_flow_read", st, c) : complete(f, o, 200, 1, "read");
    }
    rc = rc || compare("read", back.data() + half, o.bytes - half, kReadSeed, half, o.bytes);
    if (rc == 0 && o.send > 0) {
      Buffer m;
      const rdmad_status st = m.make(c, o.send) ? (fill(m.data(), o.send, kSendSeed),
                                                   rdmad_flow_send(f, 300, m.mr, 0, o.send))
                                                : RDMAD_ERR_SYSTEM;
      rc = st != RDMAD_OK ? fail("rdmad_flow_send", st, c) : complete(f, o, 300, 1, "send");
      if (rc == 0) std::printf("vm_flow_client: sent %llu bytes\n", static_cast<unsigned long long>(o.send));
    }
  } else if (o.phase == "bw") {
    fill(w.data(), half, o.seed);
    std::memset(back.data(), 0, o.bytes);
    for (uint64_t r = 0; rc == 0 && r < o.rounds; ++r) {
      const auto t0 = Clock::now();
      rc = stream(f, o, true, w.mr, &remote, half, 10000 + r * 1000, "bw write");
      const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
      if (rc == 0)
        std::printf("report: flows WRITE %llu B in %llu B requests, %llu in flight, round %llu: %.4f Gb/s\n",
                    static_cast<unsigned long long>(half), static_cast<unsigned long long>(o.request),
                    static_cast<unsigned long long>(o.window), static_cast<unsigned long long>(r + 1),
                    static_cast<double>(half) * 8 / secs / 1e9);
    }
    rc = rc || stream(f, o, false, back.mr, &remote, half, 5000, "read back");
    rc = rc || compare("written and read back", back.data(), half, o.seed, 0, half);
  } else {
    fill(w.data(), half, o.seed);
    std::memset(back.data(), 0, o.bytes);
    rc = stream(f, o, true, w.mr, &remote, half, 1000, "write", o.phase == "cut" ? o.cut_after : -1);
    rc = rc || stream(f, o, false, back.mr, &remote, half, 5000, "read back");
    rc = rc || compare("written and read back", back.data(), half, o.seed, 0, half);
  }
  rdmad_flow_close(f);
  if (rc == 0) rc = !write_file(o.dir + "/phase-" + o.phase, "1");
  if (rc == 0 && o.done) rc = !write_file(o.dir + "/done", "1");
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!parse(argc, argv, o)) {
    std::fprintf(stderr,
                 "usage: vm_flow_client target|initiator --peer NODE --dir DIR [--bytes N] [--recv M] [--send M]\n"
                 "       [--seed S] [--expect-seed S] [--phase basic|cut|again|bw] [--cut-after K --cut CMD]\n"
                 "       [--request BYTES] [--rounds R] [--window W] [--socket PATH] [--timeout S] [--done]\n");
    return 2;
  }
  setvbuf(stdout, nullptr, _IOLBF, 0);
  rdmad_client* c = nullptr;
  if (rdmad_status s = rdmad_connect(o.socket.c_str(), &c); s != RDMAD_OK) return fail("rdmad_connect", s, nullptr);
  const int rc = o.mode == "target" ? target(c, o) : initiator(c, o);
  rdmad_disconnect(c);
  return rc;
}
