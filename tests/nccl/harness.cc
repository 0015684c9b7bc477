// Drives libnccl-net-rdmad.so as NCCL does: dlopen, the versioned table, handles carried out of band
// (files in a shared directory stand for NCCL's bootstrap), connect/accept polled to completion,
// isend/irecv/test. One process is one rank; the tests start several (tests/nccl/plugin_test.cc, and
// vm_dmabuf in a guest: tests/vm/dmabuf). Modes: harness_allreduce.cc, harness_sequence.cc.
//
//   nccl_harness --plugin SO --abi 8|9|10 --rank R --nranks N --dir DIR MODE [options]
//   MODE allreduce   ring AllReduce (float32 sum) and AllGather over the ranks in --ring order,
//                    --elements E --iterations I; prints "iteration K ok T ms" after each
//   --dev D          the device every comm uses (default 0)
//   --memory M       host (default: NCCL's host buffers, which the plugin stages); memfd: a sealed
//                    memfd mapped shared for the data and gather buffers (moved without a copy)
//                    and privately for the scratch one (staged); gpu: device memory of the CUDA
//                    driver (the fake one where LD_LIBRARY_PATH puts it first), registered as NCCL
//                    registers GPU memory: regMrDmaBuf with the driver's dma-buf for the data and
//                    gather buffers, regMr (type CUDA) for the scratch one
//   MODE sequence    2 ranks: the API's corner cases (several comms, multi-receive by tag, truncated,
//                    zero-size and oversize messages, many requests in flight, close orders)
//   MODE pending     2 ranks: rank 0 posts a send and a receive nobody answers, prints "posted", and
//                    reports how test() fails when the other node goes away
//   MODE properties  prints what the plugin says about each device
#include "harness.h"

#include <dlfcn.h>

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

namespace rdmad::nccl::harness {

void die(const char* fmt, ...) {
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

namespace {

void logger(abi::LogLevel level, unsigned long, const char*, int, const char* fmt, ...) {
  if (level > abi::kLogInfo) return;
  va_list ap;
  va_start(ap, fmt);
  std::fprintf(stderr, "[nccl log %d] ", level);
  std::vfprintf(stderr, fmt, ap);
  std::fprintf(stderr, "\n");
  va_end(ap);
}

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
    n.reg_mr_dmabuf = t->reg_mr_dmabuf;
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
    n.connect = [t, config](int d, void* h, void** s) mutable {
      return t->connect(d, &config, h, s, nullptr);
    };
    n.isend = [t](void* c, void* d, size_t s, int tag, void* m, void** r) {
      return t->isend(c, d, s, tag, m, nullptr, r);
    };
    n.irecv = [t](void* c, int k, void** d, size_t* s, int* tags, void** m, void** r) {
      return t->irecv(c, k, d, s, tags, m, nullptr, r);
    };
  }
  return n;
}

}  // namespace

Net g_net;
Args g_args;

void check(int r, const char* what) {
  if (r != abi::kSuccess) die("%s returned %d", what, r);
}

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

int wait(void* req, int* sizes, int expect_error) {
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

void fill(std::vector<uint8_t>& v, uint32_t seed) {
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<uint8_t>((i * 2654435761u + seed) >> 13);
}

void close_comms(void* send, void* recv, void* listen) {
  check(g_net.close_send(send), "closeSend");
  check(g_net.close_recv(recv), "closeRecv");
  check(g_net.close_listen(listen), "closeListen");
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
    say("device %d name=%s pci=%s guid=%llx ptr=%d speed=%d max_recvs=%d reg_is_global=%d max_comms=%d", d,
        p.name, p.pci_path ? p.pci_path : "(none)", static_cast<unsigned long long>(p.guid), p.ptr_support,
        p.speed, p.max_recvs, p.reg_is_global, p.max_comms);
    if (p.vprops.ndevs > 1) say("device %d members %d,%d", d, p.vprops.devs[0], p.vprops.devs[1]);
  }
  return 0;
}

}  // namespace rdmad::nccl::harness

using namespace rdmad::nccl::harness;

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) die("%s needs a value", a.c_str());
      return argv[++i];
    };
    if (a == "--plugin")
      g_args.plugin = next();
    else if (a == "--abi")
      g_args.abi = std::stoi(next());
    else if (a == "--rank")
      g_args.rank = std::stoi(next());
    else if (a == "--nranks")
      g_args.nranks = std::stoi(next());
    else if (a == "--dir")
      g_args.dir = next();
    else if (a == "--elements")
      g_args.elements = std::stoull(next());
    else if (a == "--iterations")
      g_args.iterations = std::stoi(next());
    else if (a == "--dev")
      g_args.dev = std::stoi(next());
    else if (a == "--memory")
      g_args.memory = next();
    else if (a == "--ring") {
      std::stringstream ss(next());
      for (std::string x; std::getline(ss, x, ',');) g_args.ring.push_back(std::stoi(x));
    } else if (a[0] != '-')
      g_args.mode = a;
    else
      die("unknown option %s", a.c_str());
  }
  g_net = load(g_args.plugin, g_args.abi);
  if (g_args.mode == "allreduce") return run_allreduce();
  if (g_args.mode == "sequence") return run_sequence();
  if (g_args.mode == "pending") return run_pending();
  if (g_args.mode == "properties") return run_properties();
  die("unknown mode %s", g_args.mode.c_str());
}
