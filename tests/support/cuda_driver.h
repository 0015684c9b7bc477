// The CUDA driver calls tests make themselves (contexts, device memory), loaded at run time like
// librdmad loads it: the real driver where a GPU exists, the fake one (support/fake_cuda) where a
// test's LD_LIBRARY_PATH puts it first.
#pragma once

#include <dlfcn.h>

#include <string>

namespace rdmad::test {

struct CudaDriver {
  void* lib = nullptr;
  int (*init)(unsigned) = nullptr;
  int (*device_count)(int*) = nullptr;
  int (*retain)(void**, int) = nullptr;
  int (*set_current)(void*) = nullptr;
  int (*mem_alloc)(unsigned long long*, size_t) = nullptr;
  int (*mem_free)(unsigned long long) = nullptr;

  // dlopen and symbol lookup only. Empty when the library is there, else why not.
  std::string open() {
    lib = dlopen("libcuda.so.1", RTLD_NOW);
    if (lib == nullptr) return std::string("CUDA driver not available: ") + dlerror();
    init = reinterpret_cast<decltype(init)>(dlsym(lib, "cuInit"));
    device_count = reinterpret_cast<decltype(device_count)>(dlsym(lib, "cuDeviceGetCount"));
    retain = reinterpret_cast<decltype(retain)>(dlsym(lib, "cuDevicePrimaryCtxRetain"));
    set_current = reinterpret_cast<decltype(set_current)>(dlsym(lib, "cuCtxSetCurrent"));
    mem_alloc = reinterpret_cast<decltype(mem_alloc)>(dlsym(lib, "cuMemAlloc_v2"));
    mem_free = reinterpret_cast<decltype(mem_free)>(dlsym(lib, "cuMemFree_v2"));
    if (!init || !device_count || !retain || !set_current || !mem_alloc || !mem_free)
      return "CUDA driver too old";
    return {};
  }

  // open(), cuInit and device 0's primary context made current. Empty when usable, else why not.
  std::string load() {
    if (std::string why = open(); !why.empty()) return why;
    int n = 0;
    if (init(0) != 0 || device_count(&n) != 0 || n == 0) return "no CUDA device";
    return use_device(0) ? std::string() : "cannot make a CUDA context current";
  }

  // Makes `device`'s primary context current on this thread: later allocations land there.
  bool use_device(int device) {
    void* ctx = nullptr;
    return retain(&ctx, device) == 0 && set_current(ctx) == 0;
  }
};

}  // namespace rdmad::test
