// nccl_harness's sequence and pending modes (usage: harness.cc): the API's corner cases between two
// ranks, with what a hostile node or a stranger may do to the rendezvous, and how pending requests
// fail when the other side goes away.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "../../nccl/src/rendezvous.h"
#include "harness.h"

namespace rdmad::nccl::harness {
namespace {

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
    if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0)
      die("strangers: connect %d", i);
    if (i == n) {
      Hello bad{};
      bad.magic = kHelloMagic;
      bad.version = kHandleVersion;
      std::strcpy(bad.node, "stranger");
      if (send(fd, &bad, sizeof(bad), MSG_NOSIGNAL) != static_cast<ssize_t>(sizeof(bad)))
        die("strangers: hello");
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

}  // namespace

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
      for (int t = 0; t < 4; ++t)
        check(g_net.reg_mr(comms[0], buf[t].data(), buf[t].size(), abi::kPtrHost, &mh[t]), "regMr");
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
        if (got[i] != static_cast<int>(sz[t]))
          die("multi-receive buffer %d (tag %d): %d bytes, want %zu", i, t, got[i], sz[t]);
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
        check(g_net.reg_mr(comms[1], bufs[static_cast<size_t>(i)].data(), 128, abi::kPtrHost,
                           &mhs[static_cast<size_t>(i)]),
              "regMr");
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
  close_comms(s, r, l);
  say("pending done");
  return 0;
}

}  // namespace rdmad::nccl::harness
