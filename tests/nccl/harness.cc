// Drives libnccl-net-rdmad.so as NCCL does: dlopen, the versioned table, handles carried out of band
// (files in a shared directory stand for NCCL's bootstrap), connect/accept polled to completion,
// isend/irecv/test. One process is one rank; the test starts several (tests/nccl/plugin_test.cc).
//
//   nccl_harness --plugin SO --abi 8|9|10 --rank R --nranks N --dir DIR MODE [options]
//   MODE allreduce   ring AllReduce (float32 sum) and AllGather over the ranks in --ring order,
//                    --elements E --iterations I; prints "iteration K ok T ms" after each
//   --dev D          the device every comm uses (default 0)
//   MODE sequence    2 ranks: the API's corner cases (several comms, multi-receive by tag, truncated,
//                    zero-size and oversize messages, many requests in flight, close orders)
//   MODE pending     2 ranks: rank 0 posts a send and a receive nobody answers, prints "posted", and
//                    reports how test() fails when the other node goes away
//   MODE properties  prints what the plugin says about each device
#include <dlfcn.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "../../nccl/src/abi.h"
#include "../../nccl/src/rendezvous.h"

namespace {

using namespace rdmad::nccl;
using Clock = std::chrono::steady_clock;

[[noreturn]] void die(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  std::fprintf(stdout, "FAIL: ");
  std::vfprintf(stdout, fmt, ap);
  std::fprintf(stdout, "\n");
  std::fflush(stdout);
  va_end(ap);
  std::exit(1);
}

void say(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  std::vfprintf(stdout, fmt, ap);
  std::fprintf(stdout, "\n");
  std::fflush(stdout);
  va_end(ap);
}

void logger(abi::LogLevel level, unsigned long, const char*, int, const char* fmt, ...) {
  if (level > abi::kLogInfo) return;
  va_list ap;
  va_start(ap, fmt);
  std::fprintf(stderr, "[nccl log %d] ", level);
  std::vfprintf(stderr, fmt, ap);
  std::fprintf(stderr, "\n");
  va_end(ap);
}

// One version-neutral view of whichever table was asked for.
struct Net {
  std::function<int(int*)> devices;
  std::function<int(int, abi::PropertiesV9*)> properties;
  std::function<int(int, void*, void**)> listen;
  std::function<int(int, void*, void**)> connect;
  std::function<int(void*, void**)> accept;
  std::function<int(void*, void*, size_t, int, void**)> reg_mr;
  std::function<int(void*, void*)> dereg_mr;
  std::function<int(void*, void*, size_t, int, void*, void**)> isend;
  std::function<int(void*, int, void**, size_t*, int*, void**, void**)> irecv;
  std::function<int(void*, int*, int*)> test;
  std::function<int(void*)> close_send, close_recv, close_listen;
  std::function<int(int*, abi::VDeviceProps*)> make_vdevice;  // v9 and later
};

Net load(const std::string& path, int abi_version) {
  void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) die("dlopen %s: %s", path.c_str(), dlerror());
  const std::string sym = "ncclNetPlugin_v" + std::to_string(abi_version);
  void* table = dlsym(lib, sym.c_str());
  if (table == nullptr) die("no symbol %s", sym.c_str());
  Net n;
  auto common = [&n](auto* t) {
    if (std::strcmp(t->name, "rdmad") != 0) die("plugin name %s", t->name);
    n.devices = t->devices;
    n.listen = t->listen;
    n.accept = [t](void* l, void** r) { return t->accept(l, r, nullptr); };
    n.reg_mr = t->reg_mr;
    n.dereg_mr = t->dereg_mr;
    n.test = t->test;
    n.close_send = t->close_send;
    n.close_recv = t->close_recv;
    n.close_listen = t->close_listen;
  };
  if (abi_version == 8) {
    auto* t = static_cast<abi::NetV8*>(table);
    if (t->init(logger) != abi::kSuccess) die("init failed");
    common(t);
    n.properties = [t](int d, abi::PropertiesV9* p) {
      abi::PropertiesV8 q{};
      int r = t->get_properties(d, &q);
      *p = abi::PropertiesV9{};
      p->name = q.name;
      p->pci_path = q.pci_path;
      p->guid = q.guid;
      p->ptr_support = q.ptr_support;
      p->speed = q.speed;
      p->max_comms = q.max_comms;
      p->max_recvs = q.max_recvs;
      p->reg_is_global = q.reg_is_global;
      return r;
    };
    n.connect = [t](int d, void* h, void** s) { return t->connect(d, h, s, nullptr); };
    n.isend = [t](void* c, void* d, size_t s, int tag, void* m, void** r) {
      return t->isend(c, d, static_cast<int>(s), tag, m, r);
    };
    n.irecv = [t](void* c, int k, void** d, size_t* s, int* tags, void** m, void** r) {
      int sizes[8];
      for (int i = 0; i < k; ++i) sizes[i] = static_cast<int>(s[i]);
      return t->irecv(c, k, d, sizes, tags, m, r);
    };
  } else if (abi_version == 9) {
    auto* t = static_cast<abi::NetV9*>(table);
    if (t->init(logger) != abi::kSuccess) die("init failed");
    common(t);
    n.properties = t->get_properties;
    n.make_vdevice = t->make_vdevice;
    n.connect = [t](int d, void* h, void** s) { return t->connect(d, h, s, nullptr); };
    n.isend = t->isend;
    n.irecv = t->irecv;
  } else {
    auto* t = static_cast<abi::NetV10*>(table);
    if (t->init(logger, nullptr) != abi::kSuccess) die("init failed");
    common(t);
    n.properties = t->get_properties;
    n.make_vdevice = t->make_vdevice;
    abi::CommConfigV10 config{-1};
    n.connect = [t, config](int d, void* h, void** s) mutable { return t->connect(d, &config, h, s, nullptr); };
    n.isend = [t](void* c, void* d, size_t s, int tag, void* m, void** r) { return t->isend(c, d, s, tag, m, nullptr, r); };
    n.irecv = [t](void* c, int k, void** d, size_t* s, int* tags, void** m, void** r) {
      return t->irecv(c, k, d, s, tags, m, nullptr, r);
    };
  }
  return n;
}

struct Args {
  std::string plugin, dir, mode;
  int abi = 10, rank = 0, nranks = 2, iterations = 3, dev = 0;
  size_t elements = 1 << 20;
  std::vector<int> ring;
};

Net g_net;
Args g_args;

void check(int r, const char* what) {
  if (r != abi::kSuccess) die("%s returned %d", what, r);
}

// The out-of-band channel: a file per handle, written whole (rename) and polled for.
void put(const std::string& name, const void* data, size_t n) {
  const std::string path = g_args.dir + "/" + name, tmp = path + ".tmp";
  std::ofstream(tmp, std::ios::binary).write(static_cast<const char*>(data), static_cast<std::streamsize>(n));
  if (std::rename(tmp.c_str(), path.c_str()) != 0) die("rename %s", path.c_str());
}
void get(const std::string& name, void* data, size_t n) {
  const std::string path = g_args.dir + "/" + name;
  const auto end = Clock::now() + std::chrono::seconds(60);
  for (;;) {
    std::ifstream f(path, std::ios::binary);
    if (f && f.read(static_cast<char*>(data), static_cast<std::streamsize>(n))) return;
    if (Clock::now() > end) die("no %s within 60 s", name.c_str());
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

// A connection from rank `from` to rank `to` named `name`: the receiver listens and publishes the
// handle, the sender connects; both poll until their comm is there (NCCL's non-blocking set-up).
struct Pair {
  void* send = nullptr;
  void* recv = nullptr;
  void* listen = nullptr;
};

void* wait_send(const std::string& name) {
  char handle[abi::kHandleMaxBytes] = {};
  get("h." + name, handle, sizeof(handle));
  void* s = nullptr;
  const auto end = Clock::now() + std::chrono::seconds(60);
  while (s == nullptr) {
    check(g_net.connect(g_args.dev, handle, &s), "connect");
    if (Clock::now() > end) die("connect %s: no comm within 60 s", name.c_str());
  }
  return s;
}

void* open_listen(const std::string& name) {
  char handle[abi::kHandleMaxBytes] = {};
  void* l = nullptr;
  check(g_net.listen(g_args.dev, handle, &l), "listen");
  if (l == nullptr) die("listen gave no comm");
  put("h." + name, handle, sizeof(handle));
  return l;
}

void* wait_recv(void* l, const std::string& name) {
  void* r = nullptr;
  const auto end = Clock::now() + std::chrono::seconds(60);
  while (r == nullptr) {
    check(g_net.accept(l, &r), "accept");
    if (Clock::now() > end) die("accept %s: no comm within 60 s", name.c_str());
  }
  return r;
}

// A stranger on the network: `n` TCP connections to the listener a handle names, left open without
// a hello, and one that sends a hello with the wrong secret.
std::vector<int> strangers(const WireHandle& h, int n) {
  std::vector<int> fds;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = h.port;
  std::memcpy(&a.sin_addr, h.address, 4);
  if (h.family != AF_INET) die("strangers: the handle is not IPv4");
  for (int i = 0; i <= n; ++i) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) die("strangers: connect %d", i);
    if (i == n) {
      Hello bad{};
      bad.magic = kHelloMagic;
      bad.version = kHandleVersion;
      std::strcpy(bad.node, "stranger");
      if (send(fd, &bad, sizeof(bad), MSG_NOSIGNAL) != static_cast<ssize_t>(sizeof(bad))) die("strangers: hello");
    }
    fds.push_back(fd);
  }
  return fds;
}

// The sender's side of the four comms of `sequence`, connected together as NCCL's proxy does, with
// what another node or a stranger may do to them:
// - c3's handle comes with garbage where the connecting plugin keeps its progress (the stage id);
// - c1's handle, after c0's first connect call, carries c0's stage id: it must not take over c0's
//   connect (c0 would then connect twice, c1 never);
// - c2's listener holds 40 connections of a stranger that never say hello and one with a wrong
//   secret, opened before the rank's own: c2 is still up within 15 s (not after the strangers'
//   30 s handshake timeout).
void connect_four(const char* const names[], void* comms[]) {
  char handle[4][abi::kHandleMaxBytes] = {};
  for (int i = 0; i < 4; ++i) get(std::string("h.") + names[i], handle[i], sizeof(handle[i]));
  auto hw = [&](int i) { return reinterpret_cast<WireHandle*>(handle[i]); };
  hw(3)->stage_id = 0x4141414141414141ull;
  std::vector<int> held = strangers(*hw(2), 40);
  const auto start = Clock::now();
  check(g_net.connect(g_args.dev, handle[0], &comms[0]), "connect");
  if (comms[0] == nullptr) {
    if (hw(0)->stage_id == 0) die("connect c0: pending without a stage id in its handle");
    hw(1)->stage_id = hw(0)->stage_id;
  }
  for (;;) {
    bool all = true;
    for (int i = 3; i >= 0; --i) {  // c1 before c0: a c1 that took c0's connect over would finish it
      if (comms[i] == nullptr) check(g_net.connect(g_args.dev, handle[i], &comms[i]), "connect");
      all = all && comms[i] != nullptr;
    }
    if (all) break;
    if (Clock::now() - start > std::chrono::seconds(15)) die("connect: the four comms not up within 15 s");
  }
  for (int fd : held) close(fd);
  say("hostile handle bytes and strangers ok");
}

// Both directions at once, interleaved as NCCL's proxy does: send to `next`, receive from `prev`.
void connect_ring(const std::string& tag, int next, int prev, void** send, void** recv, void** listen) {
  *listen = open_listen(tag + "." + std::to_string(prev) + "." + std::to_string(g_args.rank));
  char handle[abi::kHandleMaxBytes] = {};
  get("h." + tag + "." + std::to_string(g_args.rank) + "." + std::to_string(next), handle, sizeof(handle));
  *send = nullptr;
  *recv = nullptr;
  const auto end = Clock::now() + std::chrono::seconds(60);
  while (*send == nullptr || *recv == nullptr) {
    if (*send == nullptr) check(g_net.connect(g_args.dev, handle, send), "connect");
    if (*recv == nullptr) check(g_net.accept(*listen, recv), "accept");
    if (Clock::now() > end) die("ring connections not up within 60 s");
  }
}

// Waits for a request; returns the sizes through `sizes` (n of them).
int wait(void* req, int* sizes, int expect_error = 0) {
  const auto end = Clock::now() + std::chrono::seconds(60);
  int done = 0;
  for (;;) {
    int r = g_net.test(req, &done, sizes);
    if (r != abi::kSuccess) {
      if (expect_error) return r;
      die("test returned %d", r);
    }
    if (done) return 0;
    if (Clock::now() > end) die("request not done within 60 s");
  }
}

void* post_send(void* comm, void* data, size_t n, int tag, void* mh) {
  void* req = nullptr;
  const auto end = Clock::now() + std::chrono::seconds(60);
  while (req == nullptr) {
    check(g_net.isend(comm, data, n, tag, mh, &req), "isend");
    if (Clock::now() > end) die("isend never accepted");
  }
  return req;
}

void* post_recv(void* comm, int k, void** data, size_t* sizes, int* tags, void** mh) {
  void* req = nullptr;
  const auto end = Clock::now() + std::chrono::seconds(60);
  while (req == nullptr) {
    check(g_net.irecv(comm, k, data, sizes, tags, mh, &req), "irecv");
    if (Clock::now() > end) die("irecv never accepted");
  }
  return req;
}

float value(int rank, size_t i) { return static_cast<float>((rank + 1) * static_cast<int>(i % 251 + 1)); }

int run_allreduce() {
  const int n = g_args.nranks;
  std::vector<int> ring = g_args.ring;
  if (ring.empty())
    for (int i = 0; i < n; ++i) ring.push_back(i);
  int pos = 0;
  while (ring[static_cast<size_t>(pos)] != g_args.rank) ++pos;
  const int next = ring[static_cast<size_t>((pos + 1) % n)], prev = ring[static_cast<size_t>((pos + n - 1) % n)];
  void *send, *recv, *listen;
  connect_ring("ring", next, prev, &send, &recv, &listen);
  const size_t count = g_args.elements, chunk = count / static_cast<size_t>(n);
  if (chunk * static_cast<size_t>(n) != count) die("--elements must be a multiple of --nranks");
  std::vector<float> data(count), tmp(chunk), gathered(count);
  void *mh_data, *mh_tmp, *mh_gather;
  check(g_net.reg_mr(recv, data.data(), count * 4, abi::kPtrHost, &mh_data), "regMr");
  check(g_net.reg_mr(recv, tmp.data(), chunk * 4, abi::kPtrHost, &mh_tmp), "regMr");
  check(g_net.reg_mr(recv, gathered.data(), count * 4, abi::kPtrHost, &mh_gather), "regMr");
  const size_t bytes = chunk * 4;
  auto step = [&](float* from, void* mh_from, float* into, void* mh_into) {
    void* s = post_send(send, from, bytes, 0, mh_from);
    void* d = into;
    size_t sz = bytes;
    int tag = 0;
    void* r = post_recv(recv, 1, &d, &sz, &tag, &mh_into);
    int got = 0, sent = 0;
    wait(s, &sent);
    wait(r, &got);
    if (got != static_cast<int>(bytes) || sent != static_cast<int>(bytes)) die("step moved %d/%d of %zu bytes", sent, got, bytes);
  };
  for (int it = 0; it < g_args.iterations; ++it) {
    const auto started = Clock::now();
    for (size_t i = 0; i < count; ++i) data[i] = value(g_args.rank, i + static_cast<size_t>(it));
    // Reduce-scatter: after n-1 steps, chunk (pos+1) mod n holds the full sum.
    for (int s = 0; s < n - 1; ++s) {
      const size_t sc = static_cast<size_t>((pos - s + 2 * n) % n), rc = static_cast<size_t>((pos - s - 1 + 2 * n) % n);
      step(data.data() + sc * chunk, mh_data, tmp.data(), mh_tmp);
      for (size_t i = 0; i < chunk; ++i) data[rc * chunk + i] += tmp[i];
    }
    // AllGather of the reduced chunks.
    for (int s = 0; s < n - 1; ++s) {
      const size_t sc = static_cast<size_t>((pos + 1 - s + 2 * n) % n), rc = static_cast<size_t>((pos - s + 2 * n) % n);
      step(data.data() + sc * chunk, mh_data, data.data() + rc * chunk, mh_data);
    }
    const int total = n * (n + 1) / 2;
    for (size_t i = 0; i < count; ++i) {
      const float want = static_cast<float>(total * static_cast<int>((i + static_cast<size_t>(it)) % 251 + 1));
      if (data[i] != want) die("allreduce iteration %d: element %zu is %g, want %g", it, i, data[i], want);
    }
    // AllGather proper: every rank's block of its own values, in rank order.
    for (size_t i = 0; i < chunk; ++i)
      gathered[static_cast<size_t>(g_args.rank) * chunk + i] = value(g_args.rank, i + static_cast<size_t>(it) * 7);
    for (int s = 0; s < n - 1; ++s) {
      const size_t sb = static_cast<size_t>(ring[static_cast<size_t>((pos - s + n) % n)]);
      const size_t rb = static_cast<size_t>(ring[static_cast<size_t>((pos - s - 1 + 2 * n) % n)]);
      step(gathered.data() + sb * chunk, mh_gather, gathered.data() + rb * chunk, mh_gather);
    }
    for (int r = 0; r < n; ++r)
      for (size_t i = 0; i < chunk; ++i)
        if (gathered[static_cast<size_t>(r) * chunk + i] != value(r, i + static_cast<size_t>(it) * 7))
          die("allgather iteration %d: rank %d's element %zu is wrong", it, r, i);
    say("iteration %d ok %lld ms", it,
        static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - started).count()));
  }
  check(g_net.dereg_mr(recv, mh_data), "deregMr");
  check(g_net.dereg_mr(recv, mh_tmp), "deregMr");
  check(g_net.dereg_mr(recv, mh_gather), "deregMr");
  check(g_net.close_send(send), "closeSend");
  check(g_net.close_recv(recv), "closeRecv");
  check(g_net.close_listen(listen), "closeListen");
  say("allreduce done");
  return 0;
}

void fill(std::vector<uint8_t>& v, uint32_t seed) {
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<uint8_t>((i * 2654435761u + seed) >> 13);
}

// Rank 0 sends, rank 1 receives, on comm pairs "c0".."c3" (one more in the other direction).
int run_sequence() {
  const bool sender = g_args.rank == 0;
  const char* names[] = {"c0", "c1", "c2", "c3"};
  void* comms[4] = {};
  void* listens[4] = {};
  if (sender) {
    connect_four(names, comms);
  } else {
    for (int i = 0; i < 4; ++i) listens[i] = open_listen(names[i]);
    for (int i = 0; i < 4; ++i) comms[i] = wait_recv(listens[i], names[i]);
  }
  // The reverse direction on its own pair.
  void *back = nullptr, *back_listen = nullptr;
  if (sender) {
    back_listen = open_listen("back");
    back = wait_recv(back_listen, "back");
  } else {
    back = wait_send("back");
  }
  say("comms up");

  // 1. A multi-receive of 4 buffers with tags in another order than the sends.
  {
    const size_t sz[4] = {1000, 70000, 3 << 20, 5};
    std::vector<uint8_t> buf[4];
    for (int t = 0; t < 4; ++t) {
      buf[t].resize(sz[t] + 64);
      if (sender) {
        buf[t].resize(sz[t]);
        fill(buf[t], 100 + static_cast<uint32_t>(t));
      }
    }
    if (sender) {
      void* reqs[4];
      void* mh[4];
      for (int t = 0; t < 4; ++t) check(g_net.reg_mr(comms[0], buf[t].data(), buf[t].size(), abi::kPtrHost, &mh[t]), "regMr");
      for (int t = 0; t < 4; ++t) reqs[t] = post_send(comms[0], buf[t].data(), sz[t], t, mh[t]);
      for (int t = 0; t < 4; ++t) {
        int s = 0;
        wait(reqs[t], &s);
        if (s != static_cast<int>(sz[t])) die("send tag %d reported %d bytes", t, s);
      }
      for (int t = 0; t < 4; ++t) check(g_net.dereg_mr(comms[0], mh[t]), "deregMr");
    } else {
      const int order[4] = {3, 1, 0, 2};  // buffer i takes tag order[i]
      void* data[4];
      size_t sizes[4];
      int tags[4];
      void* mh[4];
      for (int i = 0; i < 4; ++i) {
        const int t = order[i];
        data[i] = buf[t].data();
        sizes[i] = buf[t].size();
        tags[i] = t;
        check(g_net.reg_mr(comms[0], data[i], sizes[i], abi::kPtrHost, &mh[i]), "regMr");
      }
      void* req = post_recv(comms[0], 4, data, sizes, tags, mh);
      int got[4] = {};
      wait(req, got);
      for (int i = 0; i < 4; ++i) {
        const int t = order[i];
        if (got[i] != static_cast<int>(sz[t])) die("multi-receive buffer %d (tag %d): %d bytes, want %zu", i, t, got[i], sz[t]);
        std::vector<uint8_t> want(sz[t]);
        fill(want, 100 + static_cast<uint32_t>(t));
        if (std::memcmp(buf[t].data(), want.data(), sz[t]) != 0) die("multi-receive tag %d: wrong bytes", t);
      }
      for (int i = 0; i < 4; ++i) check(g_net.dereg_mr(comms[0], mh[i]), "deregMr");
    }
    say("multi-receive ok");
  }

  // 2. Truncated (a receive larger than the send), zero-size sends into a buffer and into a
  //    zero-size receive, and 64 requests in flight on one comm, all checked byte for byte.
  {
    std::vector<uint8_t> big(1 << 20), small(777), none(1);
    fill(small, 7);
    void *mh_big, *mh_small;
    check(g_net.reg_mr(comms[1], big.data(), big.size(), abi::kPtrHost, &mh_big), "regMr");
    check(g_net.reg_mr(comms[1], small.data(), small.size(), abi::kPtrHost, &mh_small), "regMr");
    if (sender) {
      int s = -1;
      wait(post_send(comms[1], small.data(), small.size(), 0, mh_small), &s);
      wait(post_send(comms[1], small.data(), 0, 0, mh_small), &s);
      if (s != 0) die("zero-size send reported %d", s);
      wait(post_send(comms[1], small.data(), 0, 0, mh_small), &s);
      std::vector<void*> reqs;
      for (int i = 0; i < 64; ++i) reqs.push_back(post_send(comms[1], small.data() + i, 100, 0, mh_small));
      for (void* r : reqs) wait(r, &s);
    } else {
      void* d = big.data();
      size_t sz = big.size();
      int tag = 0, got = -1;
      std::memset(big.data(), 0xee, big.size());
      wait(post_recv(comms[1], 1, &d, &sz, &tag, &mh_big), &got);
      std::vector<uint8_t> want(777);
      fill(want, 7);
      if (got != 777 || std::memcmp(big.data(), want.data(), 777) != 0 || big[777] != 0xee)
        die("truncated receive: %d bytes (want 777), or bytes beyond the send touched", got);
      wait(post_recv(comms[1], 1, &d, &sz, &tag, &mh_big), &got);
      if (got != 0) die("zero-size send received as %d bytes", got);
      size_t zero = 0;
      void* z = none.data();
      wait(post_recv(comms[1], 1, &z, &zero, &tag, &mh_big), &got);
      if (got != 0) die("zero-size receive: %d bytes", got);
      std::vector<void*> reqs;
      std::vector<std::vector<uint8_t>> bufs(64, std::vector<uint8_t>(128));
      std::vector<void*> mhs(64);
      for (int i = 0; i < 64; ++i) {
        check(g_net.reg_mr(comms[1], bufs[static_cast<size_t>(i)].data(), 128, abi::kPtrHost, &mhs[static_cast<size_t>(i)]), "regMr");
        void* dd = bufs[static_cast<size_t>(i)].data();
        size_t s128 = 128;
        reqs.push_back(post_recv(comms[1], 1, &dd, &s128, &tag, &mhs[static_cast<size_t>(i)]));
      }
      // Poll them out of order, as NCCL's proxy does when it walks its steps.
      for (int i = 63; i >= 0; --i) {
        wait(reqs[static_cast<size_t>(i)], &got);
        if (got != 100 || std::memcmp(bufs[static_cast<size_t>(i)].data(), want.data() + i, 100) != 0)
          die("request %d of 64: %d bytes or wrong ones", i, got);
      }
      for (void* m : mhs) check(g_net.dereg_mr(comms[1], m), "deregMr");
    }
    check(g_net.dereg_mr(comms[1], mh_big), "deregMr");
    check(g_net.dereg_mr(comms[1], mh_small), "deregMr");
    say("truncated, zero-size and 64 in flight ok");
  }

  // 3. The reverse direction: the receiving rank sends 8 MiB back.
  {
    std::vector<uint8_t> b(8 << 20);
    void* mh;
    check(g_net.reg_mr(back, b.data(), b.size(), abi::kPtrHost, &mh), "regMr");
    int got = -1;
    if (!sender) {
      fill(b, 99);
      wait(post_send(back, b.data(), b.size(), 0, mh), &got);
    } else {
      void* d = b.data();
      size_t sz = b.size();
      int tag = 0;
      wait(post_recv(back, 1, &d, &sz, &tag, &mh), &got);
      std::vector<uint8_t> want(8 << 20);
      fill(want, 99);
      if (got != (8 << 20) || b != want) die("reverse 8 MiB: %d bytes or wrong ones", got);
    }
    check(g_net.dereg_mr(back, mh), "deregMr");
    say("reverse ok");
  }

  // 4. A send larger than the receive: an error on both sides, never a hang (comm c2 only).
  {
    std::vector<uint8_t> b(4096);
    void* mh;
    check(g_net.reg_mr(comms[2], b.data(), b.size(), abi::kPtrHost, &mh), "regMr");
    int got = 0;
    int r;
    if (sender) {
      r = wait(post_send(comms[2], b.data(), 4096, 0, mh), &got, 1);
    } else {
      void* d = b.data();
      size_t sz = 1000;
      int tag = 0;
      r = wait(post_recv(comms[2], 1, &d, &sz, &tag, &mh), &got, 1);
    }
    if (r != abi::kInvalidUsage) die("oversize send: test returned %d, want ncclInvalidUsage (5)", r);
    check(g_net.dereg_mr(comms[2], mh), "deregMr");
    say("oversize refused");
  }

  // 5. Close in every order: c0 send side first, c1 receive side first (the sender waits for the
  //    receiver's "closed" mark), c2 after an error, c3 with its listen comm closed first.
  if (sender) {
    check(g_net.close_send(comms[0]), "closeSend");
    char mark;
    get("closed.c1", &mark, 1);
    check(g_net.close_send(comms[1]), "closeSend");
    check(g_net.close_send(comms[2]), "closeSend");
    check(g_net.close_send(comms[3]), "closeSend");
    check(g_net.close_recv(back), "closeRecv");
    check(g_net.close_listen(back_listen), "closeListen");
  } else {
    check(g_net.close_recv(comms[1]), "closeRecv");
    put("closed.c1", "x", 1);
    check(g_net.close_listen(listens[3]), "closeListen");
    check(g_net.close_recv(comms[3]), "closeRecv");
    check(g_net.close_recv(comms[0]), "closeRecv");
    check(g_net.close_recv(comms[2]), "closeRecv");
    for (int i = 0; i < 3; ++i) check(g_net.close_listen(listens[i]), "closeListen");
    check(g_net.close_send(back), "closeSend");
  }
  say("sequence done");
  return 0;
}

int run_pending() {
  if (g_args.rank == 1) {
    void* l = open_listen("p");
    void* r = wait_recv(l, "p");
    void* s = wait_send("q");
    say("connected");
    char mark;
    // Stays alive (its process is not what goes away) until the test is over.
    const std::string stop = g_args.dir + "/stop";
    while (access(stop.c_str(), F_OK) != 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    (void)mark;
    (void)r;
    (void)s;
    return 0;
  }
  void* s = wait_send("p");
  void* l = open_listen("q");
  void* r = wait_recv(l, "q");
  std::vector<uint8_t> a(4 << 20), b(4 << 20);
  void *ma, *mb;
  check(g_net.reg_mr(s, a.data(), a.size(), abi::kPtrHost, &ma), "regMr");
  check(g_net.reg_mr(r, b.data(), b.size(), abi::kPtrHost, &mb), "regMr");
  void* sreq = post_send(s, a.data(), a.size(), 0, ma);
  void* d = b.data();
  size_t sz = b.size();
  int tag = 0;
  void* rreq = post_recv(r, 1, &d, &sz, &tag, &mb);
  say("posted");
  int rs = 0, rr = 0, done = 0, sizes = 0;
  const auto end = Clock::now() + std::chrono::seconds(30);
  while ((rs == 0 || rr == 0) && Clock::now() < end) {
    if (rs == 0) {
      rs = g_net.test(sreq, &done, &sizes);
      if (rs == 0 && done) die("the unanswered send completed");
    }
    if (rr == 0) {
      rr = g_net.test(rreq, &done, &sizes);
      if (rr == 0 && done) die("the unanswered receive completed");
    }
  }
  say("send test %d receive test %d", rs, rr);
  if (rs == 0 || rr == 0) die("a pending request was still pending 30 s after posting");
  check(g_net.close_send(s), "closeSend");
  check(g_net.close_recv(r), "closeRecv");
  check(g_net.close_listen(l), "closeListen");
  say("pending done");
  return 0;
}

int run_properties() {
  int n = 0;
  check(g_net.devices(&n), "devices");
  if (n >= 2 && g_net.make_vdevice) {  // NCCL's NIC fusion: one virtual device over devices 0 and 1
    abi::VDeviceProps v{2, {0, 1, 0, 0}};
    int merged = -1;
    check(g_net.make_vdevice(&merged, &v), "makeVDevice");
    say("merged device %d", merged);
    check(g_net.devices(&n), "devices");
  }
  say("devices %d", n);
  for (int d = 0; d < n; ++d) {
    abi::PropertiesV9 p{};
    check(g_net.properties(d, &p), "getProperties");
    say("device %d name=%s pci=%s guid=%llx ptr=%d speed=%d max_recvs=%d reg_is_global=%d max_comms=%d", d, p.name,
        p.pci_path ? p.pci_path : "(none)", static_cast<unsigned long long>(p.guid), p.ptr_support, p.speed,
        p.max_recvs, p.reg_is_global, p.max_comms);
    if (p.vprops.ndevs > 1) say("device %d members %d,%d", d, p.vprops.devs[0], p.vprops.devs[1]);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) die("%s needs a value", a.c_str());
      return argv[++i];
    };
    if (a == "--plugin") g_args.plugin = next();
    else if (a == "--abi") g_args.abi = std::stoi(next());
    else if (a == "--rank") g_args.rank = std::stoi(next());
    else if (a == "--nranks") g_args.nranks = std::stoi(next());
    else if (a == "--dir") g_args.dir = next();
    else if (a == "--elements") g_args.elements = std::stoull(next());
    else if (a == "--iterations") g_args.iterations = std::stoi(next());
    else if (a == "--dev") g_args.dev = std::stoi(next());
    else if (a == "--ring") {
      std::stringstream ss(next());
      for (std::string x; std::getline(ss, x, ',');) g_args.ring.push_back(std::stoi(x));
    } else if (a[0] != '-') g_args.mode = a;
    else die("unknown option %s", a.c_str());
  }
  g_net = load(g_args.plugin, g_args.abi);
  if (g_args.mode == "allreduce") return run_allreduce();
  if (g_args.mode == "sequence") return run_sequence();
  if (g_args.mode == "pending") return run_pending();
  if (g_args.mode == "properties") return run_properties();
  die("unknown mode %s", g_args.mode.c_str());
}
