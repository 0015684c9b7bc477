// The NCCL plugin harness's shared parts (tests/nccl/harness.cc): the version-neutral view of the
// plugin's table, the out-of-band channel for handles, and the polled calls every mode makes.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "../../nccl/src/abi.h"

namespace rdmad::nccl::harness {

using Clock = std::chrono::steady_clock;

// Prints "FAIL: ..." and exits 1.
[[noreturn]] void die(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
// One line on stdout, flushed.
void say(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

// One version-neutral view of whichever table was asked for.
struct Net {
  std::function<int(int*)> devices;
  std::function<int(int, abi::PropertiesV9*)> properties;
  std::function<int(int, void*, void**)> listen;
  std::function<int(int, void*, void**)> connect;
  std::function<int(void*, void**)> accept;
  std::function<int(void*, void*, size_t, int, void**)> reg_mr;
  std::function<int(void*, void*, size_t, int, uint64_t, int, void**)> reg_mr_dmabuf;
  std::function<int(void*, void*)> dereg_mr;
  std::function<int(void*, void*, size_t, int, void*, void**)> isend;
  std::function<int(void*, int, void**, size_t*, int*, void**, void**)> irecv;
  std::function<int(void*, int*, int*)> test;
  std::function<int(void*)> close_send, close_recv, close_listen;
  std::function<int(int*, abi::VDeviceProps*)> make_vdevice;  // v9 and later
};

struct Args {
  std::string plugin, dir, mode, memory = "host";
  int abi = 10, rank = 0, nranks = 2, iterations = 3, dev = 0;
  size_t elements = 1 << 20;
  std::vector<int> ring;
};

extern Net g_net;
extern Args g_args;

// Dies unless `r` is ncclSuccess.
void check(int r, const char* what);

// The out-of-band channel: a file per handle, written whole (rename) and polled for.
void put(const std::string& name, const void* data, size_t n);
void get(const std::string& name, void* data, size_t n);

// A connection from rank `from` to rank `to` named `name`: the receiver listens and publishes the
// handle, the sender connects; both poll until their comm is there (NCCL's non-blocking set-up).
void* wait_send(const std::string& name);
void* open_listen(const std::string& name);
void* wait_recv(void* l, const std::string& name);
// Both directions at once, interleaved as NCCL's proxy does: send to `next`, receive from `prev`.
void connect_ring(const std::string& tag, int next, int prev, void** send, void** recv, void** listen);

// Waits for a request; returns the sizes through `sizes` (n of them). With `expect_error`, a failed
// test() returns its code instead of dying.
int wait(void* req, int* sizes, int expect_error = 0);
void* post_send(void* comm, void* data, size_t n, int tag, void* mh);
void* post_recv(void* comm, int k, void** data, size_t* sizes, int* tags, void** mh);
void fill(std::vector<uint8_t>& v, uint32_t seed);
// closeSend, closeRecv and closeListen, each checked.
void close_comms(void* send, void* recv, void* listen);

// The modes (harness.cc's usage).
int run_allreduce();   // harness_allreduce.cc
int run_sequence();    // harness_sequence.cc
int run_pending();     // harness_sequence.cc
int run_properties();  // harness.cc

}  // namespace rdmad::nccl::harness
