// nccl_harness's allreduce mode (usage: harness.cc): a ring AllReduce and AllGather over the ranks,
// on host memory or on the CUDA driver's device memory registered as NCCL registers it.
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "harness.h"
#include "support/cuda_driver.h"

namespace rdmad::nccl::harness {
namespace {

float value(int rank, size_t i) { return static_cast<float>((rank + 1) * static_cast<int>(i % 251 + 1)); }

// The CUDA driver, loaded on first use (the harness dies with the reason when it cannot be).
rdmad::test::CudaDriver& cuda() {
  static rdmad::test::CudaDriver d;
  static const std::string why = d.load();
  if (!why.empty()) die("--memory gpu: %s", why.c_str());
  return d;
}

// A buffer of `count` floats registered with the plugin on `comm`: host memory (a vector), a sealed
// memfd (--memory memfd; mapped shared when `zero_copy`, else privately), or device memory (--memory
// gpu) registered as NCCL registers it (through its dma-buf when `zero_copy`, else regMr of CUDA
// memory). The fake driver's device memory is mapped into this process, so the harness reads and
// writes it where a real job's kernels would.
class Registered {
 public:
  Registered(void* comm, size_t count, bool zero_copy) : comm_(comm) {
    const size_t bytes = count * sizeof(float);
    if (g_args.memory == "host") {
      host_.resize(count);
      data_ = host_.data();
      check(g_net.reg_mr(comm, data_, bytes, abi::kPtrHost, &mh_), "regMr");
      return;
    }
    if (g_args.memory == "memfd") {
      // A sealed memfd, as rdmad_alloc_host makes: mapped shared for the data and gather buffers
      // (registered as they are), privately for the scratch one (whose writes the daemon's own
      // mapping would not see: it must be staged).
      memfd_ = memfd_create("harness", MFD_CLOEXEC | MFD_ALLOW_SEALING);
      if (memfd_ < 0 || ftruncate(memfd_, static_cast<off_t>(bytes)) != 0 ||
          fcntl(memfd_, F_ADD_SEALS, F_SEAL_SHRINK) != 0)
        die("memfd of %zu bytes: %s", bytes, std::strerror(errno));
      void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, zero_copy ? MAP_SHARED : MAP_PRIVATE, memfd_, 0);
      if (p == MAP_FAILED) die("mmap of the memfd: %s", std::strerror(errno));
      mapped_ = bytes;
      data_ = static_cast<float*>(p);
      check(g_net.reg_mr(comm, data_, bytes, abi::kPtrHost, &mh_), "regMr (memfd)");
      return;
    }
    if (g_args.memory != "gpu") die("--memory %s: expected host, memfd or gpu", g_args.memory.c_str());
    if (cuda().mem_alloc(&dptr_, bytes) != 0) die("cuMemAlloc of %zu bytes failed", bytes);
    data_ = reinterpret_cast<float*>(dptr_);
    if (!zero_copy) {
      check(g_net.reg_mr(comm, data_, bytes, abi::kPtrCuda, &mh_), "regMr (CUDA)");
      return;
    }
    // NCCL: cuMemGetHandleForAddressRange over the page-aligned range, then regMrDmaBuf; the fd
    // stays the caller's, closed once registered.
    using Export = int (*)(void*, unsigned long long, size_t, int, unsigned long long);
    auto get = reinterpret_cast<Export>(dlsym(cuda().lib, "cuMemGetHandleForAddressRange"));
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE)), span = (bytes + page - 1) / page * page;
    int fd = -1;
    if (get == nullptr || get(&fd, dptr_, span, 1 /* CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD */, 0) != 0)
      die("cuMemGetHandleForAddressRange of %zu bytes failed", span);
    check(g_net.reg_mr_dmabuf(comm, data_, bytes, abi::kPtrCuda, 0, fd, &mh_), "regMrDmaBuf");
    close(fd);
  }
  ~Registered() {
    check(g_net.dereg_mr(comm_, mh_), "deregMr");
    if (dptr_ != 0) cuda().mem_free(dptr_);
    if (mapped_ != 0) munmap(data_, mapped_);
    if (memfd_ >= 0) close(memfd_);
  }
  Registered(const Registered&) = delete;
  Registered& operator=(const Registered&) = delete;
  float* data() const { return data_; }
  void* mh() const { return mh_; }

 private:
  void* comm_;
  std::vector<float> host_;
  unsigned long long dptr_ = 0;
  int memfd_ = -1;
  size_t mapped_ = 0;
  float* data_ = nullptr;
  void* mh_ = nullptr;
};

}  // namespace

int run_allreduce() {
  const int n = g_args.nranks;
  std::vector<int> ring = g_args.ring;
  if (ring.empty())
    for (int i = 0; i < n; ++i) ring.push_back(i);
  int pos = 0;
  while (ring[static_cast<size_t>(pos)] != g_args.rank) ++pos;
  const int next = ring[static_cast<size_t>((pos + 1) % n)],
            prev = ring[static_cast<size_t>((pos + n - 1) % n)];
  void *send, *recv, *listen;
  connect_ring("ring", next, prev, &send, &recv, &listen);
  const size_t count = g_args.elements, chunk = count / static_cast<size_t>(n);
  if (chunk * static_cast<size_t>(n) != count) die("--elements must be a multiple of --nranks");
  auto data_mem = std::make_unique<Registered>(recv, count, true);
  auto tmp_mem = std::make_unique<Registered>(recv, chunk, false);
  auto gathered_mem = std::make_unique<Registered>(recv, count, true);
  float *data = data_mem->data(), *tmp = tmp_mem->data(), *gathered = gathered_mem->data();
  void *mh_data = data_mem->mh(), *mh_tmp = tmp_mem->mh(), *mh_gather = gathered_mem->mh();
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
    if (got != static_cast<int>(bytes) || sent != static_cast<int>(bytes))
      die("step moved %d/%d of %zu bytes", sent, got, bytes);
  };
  for (int it = 0; it < g_args.iterations; ++it) {
    const auto started = Clock::now();
    for (size_t i = 0; i < count; ++i) data[i] = value(g_args.rank, i + static_cast<size_t>(it));
    // Reduce-scatter: after n-1 steps, chunk (pos+1) mod n holds the full sum.
    for (int s = 0; s < n - 1; ++s) {
      const size_t sc = static_cast<size_t>((pos - s + 2 * n) % n),
                   rc = static_cast<size_t>((pos - s - 1 + 2 * n) % n);
      step(data + sc * chunk, mh_data, tmp, mh_tmp);
      for (size_t i = 0; i < chunk; ++i) data[rc * chunk + i] += tmp[i];
    }
    // AllGather of the reduced chunks.
    for (int s = 0; s < n - 1; ++s) {
      const size_t sc = static_cast<size_t>((pos + 1 - s + 2 * n) % n),
                   rc = static_cast<size_t>((pos - s + 2 * n) % n);
      step(data + sc * chunk, mh_data, data + rc * chunk, mh_data);
    }
    const int total = n * (n + 1) / 2;
    for (size_t i = 0; i < count; ++i) {
      const float want =
          static_cast<float>(total * static_cast<int>((i + static_cast<size_t>(it)) % 251 + 1));
      if (data[i] != want) die("allreduce iteration %d: element %zu is %g, want %g", it, i, data[i], want);
    }
    // AllGather proper: every rank's block of its own values, in rank order.
    for (size_t i = 0; i < chunk; ++i)
      gathered[static_cast<size_t>(g_args.rank) * chunk + i] =
          value(g_args.rank, i + static_cast<size_t>(it) * 7);
    for (int s = 0; s < n - 1; ++s) {
      const size_t sb = static_cast<size_t>(ring[static_cast<size_t>((pos - s + n) % n)]);
      const size_t rb = static_cast<size_t>(ring[static_cast<size_t>((pos - s - 1 + 2 * n) % n)]);
      step(gathered + sb * chunk, mh_gather, gathered + rb * chunk, mh_gather);
    }
    for (int r = 0; r < n; ++r)
      for (size_t i = 0; i < chunk; ++i)
        if (gathered[static_cast<size_t>(r) * chunk + i] != value(r, i + static_cast<size_t>(it) * 7))
          die("allgather iteration %d: rank %d's element %zu is wrong", it, r, i);
    say("iteration %d ok %lld ms", it,
        static_cast<long long>(
            std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - started).count()));
  }
  data_mem.reset();  // deregistered before the comms close, as NCCL does
  tmp_mem.reset();
  gathered_mem.reset();
  close_comms(send, recv, listen);
  say("allreduce done");
  return 0;
}

}  // namespace rdmad::nccl::harness
