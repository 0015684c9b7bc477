#include "cuda_loader.h"

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <mutex>

// The few driver API declarations used here, so the library builds without the CUDA toolkit.
// Where the toolkit headers are present the values are checked against them.
namespace rdmad::client::cu {
using Result = int;
using DevicePtr = unsigned long long;
using Device = int;
constexpr Result kSuccess = 0;
constexpr int kPointerAttributeMemoryType = 2;        // CU_POINTER_ATTRIBUTE_MEMORY_TYPE
constexpr int kPointerAttributeDeviceOrdinal = 9;     // CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL
constexpr unsigned kMemoryTypeDevice = 2;             // CU_MEMORYTYPE_DEVICE
constexpr int kDeviceAttributeDmaBufSupported = 124;  // CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED
constexpr int kMemRangeHandleTypeDmaBufFd = 1;        // CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD
constexpr int kApiVersion = 12000;                    // ask cuGetProcAddress for the CUDA 12 ABI
}  // namespace rdmad::client::cu

#if __has_include(<cuda.h>)
#include <cuda.h>
static_assert(rdmad::client::cu::kPointerAttributeMemoryType == CU_POINTER_ATTRIBUTE_MEMORY_TYPE);
static_assert(rdmad::client::cu::kPointerAttributeDeviceOrdinal == CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL);
static_assert(rdmad::client::cu::kMemoryTypeDevice == CU_MEMORYTYPE_DEVICE);
static_assert(rdmad::client::cu::kDeviceAttributeDmaBufSupported == CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED);
static_assert(rdmad::client::cu::kMemRangeHandleTypeDmaBufFd == CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD);
static_assert(sizeof(rdmad::client::cu::DevicePtr) == sizeof(CUdeviceptr));
#endif

namespace rdmad::client {
namespace {

struct CudaApi {
  bool loaded = false;
  std::string error;
  cu::Result (*init)(unsigned) = nullptr;
  cu::Result (*get_error_name)(cu::Result, const char**) = nullptr;
  cu::Result (*pointer_get_attribute)(void*, int, cu::DevicePtr) = nullptr;
  cu::Result (*device_get)(cu::Device*, int) = nullptr;
  cu::Result (*device_get_attribute)(int*, int, cu::Device) = nullptr;
  cu::Result (*device_get_pci_bus_id)(char*, int, cu::Device) = nullptr;
  cu::Result (*mem_get_address_range)(cu::DevicePtr*, size_t*, cu::DevicePtr) = nullptr;
  cu::Result (*mem_get_handle_for_address_range)(void*, cu::DevicePtr, size_t, int,
                                                 unsigned long long) = nullptr;

  std::string describe(const char* call, cu::Result r) const {
    const char* name = nullptr;
    if (get_error_name == nullptr || get_error_name(r, &name) != cu::kSuccess || name == nullptr) name = "?";
    return std::string(call) + " failed: " + name + " (" + std::to_string(r) + ")";
  }
};

using GetProcV2 = cu::Result (*)(const char*, void**, int, unsigned long long, int*);
using GetProcV1 = cu::Result (*)(const char*, void**, int, unsigned long long);

template <class Fn>
bool resolve(void* lib, const char* symbol, Fn* out) {
  void* fn = nullptr;
  if (auto v2 = reinterpret_cast<GetProcV2>(dlsym(lib, "cuGetProcAddress_v2")); v2 != nullptr) {
    int status = 0;
    if (v2(symbol, &fn, cu::kApiVersion, 0, &status) != cu::kSuccess) fn = nullptr;
  } else if (auto v1 = reinterpret_cast<GetProcV1>(dlsym(lib, "cuGetProcAddress")); v1 != nullptr) {
    if (v1(symbol, &fn, 11070, 0) != cu::kSuccess) fn = nullptr;  // 11.7 introduced dma-buf export
  }
  *out = reinterpret_cast<Fn>(fn);
  return fn != nullptr;
}

const CudaApi& cuda() {
  static CudaApi api;
  static std::once_flag once;
  std::call_once(once, [] {
    void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
      api.error = std::string("CUDA driver not available: ") + dlerror();
      return;
    }
    bool ok = resolve(lib, "cuInit", &api.init) && resolve(lib, "cuGetErrorName", &api.get_error_name) &&
              resolve(lib, "cuPointerGetAttribute", &api.pointer_get_attribute) &&
              resolve(lib, "cuDeviceGet", &api.device_get) &&
              resolve(lib, "cuDeviceGetAttribute", &api.device_get_attribute) &&
              resolve(lib, "cuDeviceGetPCIBusId", &api.device_get_pci_bus_id) &&
              resolve(lib, "cuMemGetAddressRange", &api.mem_get_address_range) &&
              resolve(lib, "cuMemGetHandleForAddressRange", &api.mem_get_handle_for_address_range);
    if (!ok) {
      api.error =
          "CUDA driver too old: cuGetProcAddress or cuMemGetHandleForAddressRange missing (need CUDA >= "
          "11.7)";
      return;
    }
    if (cu::Result r = api.init(0); r != cu::kSuccess) {
      api.error = api.describe("cuInit", r);
      return;
    }
    api.loaded = true;
  });
  return api;
}

rdmad_status device_of(const CudaApi& api, uint64_t ptr, cu::Device* dev, std::string* error) {
  unsigned mem_type = 0;
  cu::Result r = api.pointer_get_attribute(&mem_type, cu::kPointerAttributeMemoryType, ptr);
  if (r != cu::kSuccess || mem_type != cu::kMemoryTypeDevice) {
    *error = "not a CUDA device pointer" +
             (r != cu::kSuccess ? ": " + api.describe("cuPointerGetAttribute", r) : "");
    return RDMAD_ERR_INVALID_ARGUMENT;
  }
  int ordinal = 0;
  if ((r = api.pointer_get_attribute(&ordinal, cu::kPointerAttributeDeviceOrdinal, ptr)) != cu::kSuccess ||
      (r = api.device_get(dev, ordinal)) != cu::kSuccess) {
    *error = api.describe("cuDeviceGet", r);
    return RDMAD_ERR_CUDA;
  }
  return RDMAD_OK;
}

}  // namespace

rdmad_status export_dmabuf(uint64_t device_ptr, uint64_t length, DmabufExport* out, std::string* error) {
  const CudaApi& api = cuda();
  if (!api.loaded) {
    *error = api.error;
    return RDMAD_ERR_CUDA;
  }
  cu::Device dev = 0;
  if (rdmad_status s = device_of(api, device_ptr, &dev, error); s != RDMAD_OK) return s;
  int dmabuf = 0;
  if (cu::Result r = api.device_get_attribute(&dmabuf, cu::kDeviceAttributeDmaBufSupported, dev);
      r != cu::kSuccess) {
    *error = api.describe("cuDeviceGetAttribute(DMA_BUF_SUPPORTED)", r);
    return RDMAD_ERR_CUDA;
  }
  if (dmabuf == 0) {
    *error =
        "GPU cannot export dma-buf (CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED = 0): the NVIDIA open kernel "
        "module "
        "and CUDA >= 11.7 are required";
    return RDMAD_ERR_NOT_SUPPORTED;
  }
  // dma-buf export works on whole host pages (64 KiB on some Arm hosts).
  const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  uint64_t base = device_ptr & ~(page - 1);
  uint64_t end = (device_ptr + length + page - 1) & ~(page - 1);
  cu::DevicePtr alloc_base = 0;
  size_t alloc_bytes = 0;
  if (cu::Result r = api.mem_get_address_range(&alloc_base, &alloc_bytes, device_ptr); r != cu::kSuccess) {
    *error = api.describe("cuMemGetAddressRange", r);
    return RDMAD_ERR_CUDA;
  }
  if (device_ptr + length < device_ptr || base < alloc_base || end > alloc_base + alloc_bytes) {
    *error =
        "page-aligned range [" + std::to_string(base) + ", " + std::to_string(end) +
        ") leaves its allocation: allocate with cuMemAlloc (page-aligned) or register a page-aligned range";
    return RDMAD_ERR_INVALID_ARGUMENT;
  }
  int fd = -1;
  if (cu::Result r =
          api.mem_get_handle_for_address_range(&fd, base, end - base, cu::kMemRangeHandleTypeDmaBufFd, 0);
      r != cu::kSuccess) {
    *error = api.describe("cuMemGetHandleForAddressRange(DMA_BUF_FD)", r);
    return RDMAD_ERR_CUDA;
  }
  out->fd = fd;
  out->offset = device_ptr - base;
  return RDMAD_OK;
}

rdmad_status gpu_pci_address(uint64_t device_ptr, std::string* pci, std::string* error) {
  const CudaApi& api = cuda();
  if (!api.loaded) {
    *error = api.error;
    return RDMAD_ERR_CUDA;
  }
  cu::Device dev = 0;
  if (rdmad_status s = device_of(api, device_ptr, &dev, error); s != RDMAD_OK) return s;
  char bus[32] = {};
  if (cu::Result r = api.device_get_pci_bus_id(bus, sizeof(bus), dev); r != cu::kSuccess) {
    *error = api.describe("cuDeviceGetPCIBusId", r);
    return RDMAD_ERR_CUDA;
  }
  *pci = bus;
  std::transform(pci->begin(), pci->end(), pci->begin(), [](unsigned char c) { return std::tolower(c); });
  return RDMAD_OK;
}

}  // namespace rdmad::client
