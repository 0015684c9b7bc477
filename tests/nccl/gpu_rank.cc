// One rank of a real NCCL AllReduce on GPU memory, with NCCL_NET_PLUGIN=rdmad in its environment
// (tests/nccl/gpu_test.cc starts two). libnccl and the CUDA runtime are loaded with dlopen and
// called through our own declarations of the few functions used (NCCL's and CUDA's documented C
// ABI), so this builds where neither is installed.
//
//   nccl_gpu_rank --probe
//       exit 0 when libnccl.so.2, the CUDA runtime and a GPU are usable here; else prints
//       "skip: <why>" and exits 77
//   nccl_gpu_rank --rank R --nranks N --dir DIR --elements E
//       rank 0 writes the NCCL unique id to DIR/id (NCCL's bootstrap); every rank puts E float32s
//       (rank r's element i = (i % 1000) + r) in device memory, runs ncclAllReduce (sum) in place,
//       copies the result back and checks every element exactly; prints "allreduce ok"
#include <dlfcn.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

namespace {

// NCCL's ncclUniqueId: 128 opaque bytes, passed by value to ncclCommInitRank.
struct NcclUniqueId {
  char internal[128];
};
constexpr int kNcclFloat32 = 7;
constexpr int kNcclSum = 0;
constexpr int kCudaMemcpyHostToDevice = 1;
constexpr int kCudaMemcpyDeviceToHost = 2;

struct Cuda {
  int (*get_device_count)(int*);
  int (*set_device)(int);
  int (*malloc)(void**, size_t);
  int (*free)(void*);
  int (*memcpy)(void*, const void*, size_t, int);
  int (*stream_create)(void**);
  int (*stream_synchronize)(void*);
  const char* (*error_string)(int);
};

struct Nccl {
  int (*get_version)(int*);
  int (*get_unique_id)(NcclUniqueId*);
  int (*comm_init_rank)(void**, int, NcclUniqueId, int);
  int (*all_reduce)(const void*, void*, size_t, int, int, void*, void*);
  int (*comm_destroy)(void*);
  const char* (*error_string)(int);
};

void* open_first(const std::vector<const char*>& names, std::string* why) {
  for (const char* n : names) {
    if (void* h = dlopen(n, RTLD_NOW | RTLD_GLOBAL)) return h;
    *why += std::string(*why == "" ? "" : "; ") + dlerror();
  }
  return nullptr;
}

template <class F>
bool sym(void* lib, const char* name, F* out, std::string* why) {
  *out = reinterpret_cast<F>(dlsym(lib, name));
  if (*out == nullptr) *why = std::string("no symbol ") + name;
  return *out != nullptr;
}

// Loads both libraries; on failure `why` says what is missing.
bool load(Cuda* c, Nccl* n, std::string* why) {
  void* rt = open_first({"libcudart.so", "libcudart.so.13", "libcudart.so.12", "/usr/local/cuda/lib64/libcudart.so"},
                        why);
  if (rt == nullptr) {
    *why = "no CUDA runtime (" + *why + ")";
    return false;
  }
  why->clear();
  void* nc = open_first({"libnccl.so.2", "/usr/local/cuda/lib64/libnccl.so.2"}, why);
  if (nc == nullptr) {
    *why = "no libnccl (" + *why + ")";
    return false;
  }
  why->clear();
  return sym(rt, "cudaGetDeviceCount", &c->get_device_count, why) && sym(rt, "cudaSetDevice", &c->set_device, why) &&
         sym(rt, "cudaMalloc", &c->malloc, why) && sym(rt, "cudaFree", &c->free, why) &&
         sym(rt, "cudaMemcpy", &c->memcpy, why) && sym(rt, "cudaStreamCreate", &c->stream_create, why) &&
         sym(rt, "cudaStreamSynchronize", &c->stream_synchronize, why) &&
         sym(rt, "cudaGetErrorString", &c->error_string, why) && sym(nc, "ncclGetVersion", &n->get_version, why) &&
         sym(nc, "ncclGetUniqueId", &n->get_unique_id, why) && sym(nc, "ncclCommInitRank", &n->comm_init_rank, why) &&
         sym(nc, "ncclAllReduce", &n->all_reduce, why) && sym(nc, "ncclCommDestroy", &n->comm_destroy, why) &&
         sym(nc, "ncclGetErrorString", &n->error_string, why);
}

[[noreturn]] void fail(const std::string& what) {
  std::printf("FAIL: %s\n", what.c_str());
  std::fflush(stdout);
  std::exit(1);
}

}  // namespace

int main(int argc, char** argv) {
  Cuda cuda{};
  Nccl nccl{};
  std::string why;
  const bool loaded = load(&cuda, &nccl, &why);
  if (argc == 2 && std::strcmp(argv[1], "--probe") == 0) {
    int count = 0;
    if (!loaded) {
      std::printf("skip: %s\n", why.c_str());
      return 77;
    }
    if (const int e = cuda.get_device_count(&count); e != 0 || count == 0) {
      std::printf("skip: no GPU (cudaGetDeviceCount: %s, %d devices)\n", e != 0 ? cuda.error_string(e) : "ok", count);
      return 77;
    }
    int version = 0;
    nccl.get_version(&version);
    std::printf("probe: %d GPU(s), NCCL %d\n", count, version);
    return 0;
  }
  int rank = -1, nranks = 0;
  size_t elements = 0;
  std::string dir;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    if (k == "--rank") rank = std::atoi(argv[i + 1]);
    else if (k == "--nranks") nranks = std::atoi(argv[i + 1]);
    else if (k == "--dir") dir = argv[i + 1];
    else if (k == "--elements") elements = std::strtoull(argv[i + 1], nullptr, 0);
    else fail("unknown argument " + k);
  }
  if (rank < 0 || nranks < 1 || rank >= nranks || dir.empty() || elements == 0)
    fail("usage: nccl_gpu_rank --probe | --rank R --nranks N --dir DIR --elements E");
  if (!loaded) fail(why);
  int count = 0;
  if (cuda.get_device_count(&count) != 0 || count == 0) fail("no GPU");
  // One GPU serves every rank when there is only one: the test gives each rank its own NCCL_HOSTID,
  // so NCCL sees ranks on different hosts and joins them through the net plugin.
  if (const int e = cuda.set_device(rank % count); e != 0) fail(std::string("cudaSetDevice: ") + cuda.error_string(e));

  NcclUniqueId id{};
  const std::string id_path = dir + "/id";
  if (rank == 0) {
    if (const int e = nccl.get_unique_id(&id); e != 0) fail(std::string("ncclGetUniqueId: ") + nccl.error_string(e));
    std::ofstream(id_path + ".tmp", std::ios::binary).write(id.internal, sizeof id.internal);
    if (std::rename((id_path + ".tmp").c_str(), id_path.c_str()) != 0) fail("rename " + id_path);
  } else {
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    for (;;) {
      std::ifstream in(id_path, std::ios::binary);
      if (in && in.read(id.internal, sizeof id.internal)) break;
      if (std::chrono::steady_clock::now() > end) fail("no unique id from rank 0 in 60 s");
      std::this_thread::sleep_for(std::chrono::milliseconds(20));  // polling a file another process writes
    }
  }
  void* comm = nullptr;
  if (const int e = nccl.comm_init_rank(&comm, nranks, id, rank); e != 0)
    fail(std::string("ncclCommInitRank: ") + nccl.error_string(e));

  std::vector<float> host(elements);
  for (size_t i = 0; i < elements; ++i) host[i] = static_cast<float>(i % 1000 + static_cast<size_t>(rank));
  void* dev = nullptr;
  void* stream = nullptr;
  if (const int e = cuda.malloc(&dev, elements * sizeof(float)); e != 0)
    fail(std::string("cudaMalloc: ") + cuda.error_string(e));
  if (cuda.stream_create(&stream) != 0) fail("cudaStreamCreate");
  if (cuda.memcpy(dev, host.data(), elements * sizeof(float), kCudaMemcpyHostToDevice) != 0) fail("cudaMemcpy in");
  if (const int e = nccl.all_reduce(dev, dev, elements, kNcclFloat32, kNcclSum, comm, stream); e != 0)
    fail(std::string("ncclAllReduce: ") + nccl.error_string(e));
  if (const int e = cuda.stream_synchronize(stream); e != 0)
    fail(std::string("cudaStreamSynchronize: ") + cuda.error_string(e));
  if (cuda.memcpy(host.data(), dev, elements * sizeof(float), kCudaMemcpyDeviceToHost) != 0) fail("cudaMemcpy out");
  // Sums of small integers are exact in float32.
  const size_t rank_sum = static_cast<size_t>(nranks) * static_cast<size_t>(nranks - 1) / 2;
  for (size_t i = 0; i < elements; ++i) {
    const float want = static_cast<float>((i % 1000) * static_cast<size_t>(nranks) + rank_sum);
    if (host[i] != want) fail("element " + std::to_string(i) + " is " + std::to_string(host[i]) + ", want " +
                              std::to_string(want));
  }
  nccl.comm_destroy(comm);
  cuda.free(dev);
  std::printf("allreduce ok: %zu float32 elements, %d ranks\n", elements, nranks);
  return 0;
}
