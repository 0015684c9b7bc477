// GPU memory through librdmad: runs only where the CUDA driver and a GPU exist. Against the soft
// backend the export must succeed on the client side and the daemon must refuse with the reason.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstring>

#include "rdmad/rdmad.h"
#include "unit/ipc/server_fixture.h"

namespace rdmad::test {
namespace {

struct Cuda {
  void* lib = nullptr;
  int (*init)(unsigned) = nullptr;
  int (*device_count)(int*) = nullptr;
  int (*retain)(void**, int) = nullptr;
  int (*set_current)(void*) = nullptr;
  int (*mem_alloc)(unsigned long long*, size_t) = nullptr;
  int (*mem_free)(unsigned long long) = nullptr;

  // Empty when usable, else why not.
  std::string load() {
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
    int n = 0;
    if (init(0) != 0 || device_count(&n) != 0 || n == 0) return "no CUDA device";
    void* ctx = nullptr;
    if (retain(&ctx, 0) != 0 || set_current(ctx) != 0) return "cannot make a CUDA context current";
    return {};
  }
};

TEST(IpcGpu, ExportsDmabufAndSoftBackendRefusesWithReason) {
  Cuda cuda;
  if (std::string why = cuda.load(); !why.empty()) GTEST_SKIP() << why;
  unsigned long long dptr = 0;
  ASSERT_EQ(cuda.mem_alloc(&dptr, 4u << 20), 0);
  TestServer srv;
  rdmad_client* c = nullptr;
  ASSERT_EQ(rdmad_connect(srv.path().c_str(), &c), RDMAD_OK);
  rdmad_location where;
  ASSERT_EQ(rdmad_locate_gpu(dptr, &where), RDMAD_OK);
  EXPECT_EQ(std::strlen(where.pci_address), 12u) << where.pci_address;  // "0000:17:00.0"
  rdmad_mr* mr = nullptr;
  // An interior, unaligned pointer: the library page-aligns the export around it.
  rdmad_status s = rdmad_register_gpu(c, dptr + 4096 + 17, 1u << 20, RDMAD_ACCESS_LOCAL_WRITE, 0, &mr);
  EXPECT_EQ(s, RDMAD_ERR_NOT_SUPPORTED) << rdmad_last_error(c);
  std::string why = rdmad_last_error(c);
  EXPECT_TRUE(why.find("backend soft") != std::string::npos ||
              why.find("DMA_BUF_SUPPORTED") != std::string::npos)
      << why;
  EXPECT_EQ(srv.region_count(), 0u);
  rdmad_disconnect(c);
  cuda.mem_free(dptr);
}

}  // namespace
}  // namespace rdmad::test
