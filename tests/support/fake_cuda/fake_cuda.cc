// A stand-in for the CUDA driver library (libcuda.so.1), for tests on machines without a GPU. It
// implements the driver API entry points that librdmad and the GPU tests call, with the driver's
// signatures, result codes and rules (documented in cuda.h): cuGetProcAddress (the CUDA 12 `_v2`
// entry point and the 11.3 one), versioned symbol lookup, per-thread current context, device
// pointers that name allocations, page-alignment checks on dma-buf export.
//
// What differs from the real driver, and why:
// - Where the kernel has a vgem device (the rxe guests of tests/vm load it), "device memory" is a
//   vgem dumb buffer mapped into this process, and cuMemGetHandleForAddressRange returns a real
//   dma-buf of it (PRIME), as the real driver exports GPU memory. vgem exports whole buffers
//   only, so a range must start at its allocation's base (else CUDA_ERROR_NOT_SUPPORTED); the
//   dma-buf may be longer than the range asked for.
// - Without vgem (this machine's own kernel has no dma-buf exporter: no udmabuf, no dma-heap, no
//   DRM device), "device memory" is a shared mapping of a memfd, and the export is a memfd
//   ("fake-cuda-dmabuf") that is not a dma-buf: the daemon refuses it, as it refuses every fd that
//   is not one. RDMAD_FAKE_CUDA_VGEM=0 forces this even where vgem exists.
//
// Behaviour is chosen per process through the environment (the CUDA runtime state a test needs to
// vary is fixed at cuInit/first lookup, as librdmad loads the driver once per process):
//   RDMAD_FAKE_CUDA_DEVICES  number of GPUs (default 2; 0 makes cuInit fail with NO_DEVICE)
//   RDMAD_FAKE_CUDA_VERSION  driver version (default 12040, 11080 for the 11.x build); below
//                            11070 cuMemGetHandleForAddressRange does not exist
//   RDMAD_FAKE_CUDA_DMABUF   value of CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED (default 1)
// Built twice: as a CUDA 12 driver (cuGetProcAddress_v2 and cuGetProcAddress) and, with
// RDMAD_FAKE_CUDA_11, as a CUDA 11 driver (cuGetProcAddress only).
// Test hooks (not in the real driver): rdmad_fake_cuda_exports, rdmad_fake_cuda_fail_next_export.
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string_view>
#include <vector>

#include "fake_cuda_abi.h"
#include "vgem.h"

namespace {

using namespace rdmad::fake_cuda;
using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
struct Context {
  CUdevice device;
};
using CUcontext = Context*;

constexpr int kMaxDevices = 4;
constexpr const char* kBusIds[kMaxDevices] = {"0000:17:00.0", "0000:CA:00.0", "0000:3B:00.0", "0000:E1:00.0"};

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::atoi(v) : fallback;
}

int device_count() {
  int n = env_int("RDMAD_FAKE_CUDA_DEVICES", 2);
  return n < 0 ? 0 : (n > kMaxDevices ? kMaxDevices : n);
}

int driver_version() {
#if defined(RDMAD_FAKE_CUDA_11)
  return env_int("RDMAD_FAKE_CUDA_VERSION", 11080);
#else
  return env_int("RDMAD_FAKE_CUDA_VERSION", 12040);
#endif
}

struct Allocation {
  CUdeviceptr base;
  size_t size;
  CUdevice device;
  int memfd;         // -1 for vgem memory
  VgemBuffer vgem;   // addr != nullptr: vgem memory
};

bool use_vgem() { return env_int("RDMAD_FAKE_CUDA_VGEM", 1) != 0 && vgem_card() >= 0; }

struct State {
  std::mutex mu;
  std::atomic<bool> initialized{false};  // read without the lock by the device queries
  std::vector<Allocation> allocations;
  Context contexts[kMaxDevices] = {{0}, {1}, {2}, {3}};
  int exports = 0;
  CUdeviceptr last_export_base = 0;
  size_t last_export_size = 0;
  CUresult fail_next_export = kSuccess;
};

State& state() {
  static State s;
  return s;
}

thread_local CUcontext current_context = nullptr;

const Allocation* find_locked(State& s, CUdeviceptr p) {
  for (const Allocation& a : s.allocations)
    if (p >= a.base && p - a.base < a.size) return &a;
  return nullptr;
}

size_t host_page() { return static_cast<size_t>(sysconf(_SC_PAGESIZE)); }

}  // namespace

extern "C" {

CUresult cuInit(unsigned int flags) {
  if (flags != 0) return kInvalidValue;
  if (device_count() == 0) return kNoDevice;
  state().initialized = true;
  return kSuccess;
}

CUresult cuDriverGetVersion(int* version) {
  if (version == nullptr) return kInvalidValue;
  *version = driver_version();
  return kSuccess;
}

CUresult cuGetErrorName(CUresult error, const char** name) {
  if (name == nullptr) return kInvalidValue;
  switch (error) {
    case kSuccess: *name = "CUDA_SUCCESS"; break;
    case kInvalidValue: *name = "CUDA_ERROR_INVALID_VALUE"; break;
    case kOutOfMemory: *name = "CUDA_ERROR_OUT_OF_MEMORY"; break;
    case kNotInitialized: *name = "CUDA_ERROR_NOT_INITIALIZED"; break;
    case kNoDevice: *name = "CUDA_ERROR_NO_DEVICE"; break;
    case kInvalidDevice: *name = "CUDA_ERROR_INVALID_DEVICE"; break;
    case kInvalidContext: *name = "CUDA_ERROR_INVALID_CONTEXT"; break;
    case kNotFound: *name = "CUDA_ERROR_NOT_FOUND"; break;
    case kNotSupported: *name = "CUDA_ERROR_NOT_SUPPORTED"; break;
    default: *name = nullptr; return kInvalidValue;
  }
  return kSuccess;
}

CUresult cuDeviceGetCount(int* count) {
  if (count == nullptr) return kInvalidValue;
  if (!state().initialized) return kNotInitialized;
  *count = device_count();
  return kSuccess;
}

CUresult cuDeviceGet(CUdevice* device, int ordinal) {
  if (device == nullptr) return kInvalidValue;
  if (!state().initialized) return kNotInitialized;
  if (ordinal < 0 || ordinal >= device_count()) return kInvalidDevice;
  *device = ordinal;
  return kSuccess;
}

CUresult cuDeviceGetAttribute(int* value, int attribute, CUdevice device) {
  if (value == nullptr) return kInvalidValue;
  if (!state().initialized) return kNotInitialized;
  if (device < 0 || device >= device_count()) return kInvalidDevice;
  if (attribute != kDeviceAttributeDmaBufSupported) return kInvalidValue;  // not modelled
  *value = env_int("RDMAD_FAKE_CUDA_DMABUF", 1) != 0 ? 1 : 0;
  return kSuccess;
}

CUresult cuDeviceGetPCIBusId(char* bus_id, int len, CUdevice device) {
  if (bus_id == nullptr || len <= 0) return kInvalidValue;
  if (!state().initialized) return kNotInitialized;
  if (device < 0 || device >= device_count()) return kInvalidDevice;
  std::snprintf(bus_id, static_cast<size_t>(len), "%s", kBusIds[device]);  // truncated like the driver
  return kSuccess;
}

CUresult cuDevicePrimaryCtxRetain(CUcontext* context, CUdevice device) {
  if (context == nullptr) return kInvalidValue;
  if (!state().initialized) return kNotInitialized;
  if (device < 0 || device >= device_count()) return kInvalidDevice;
  *context = &state().contexts[device];
  return kSuccess;
}

CUresult cuCtxSetCurrent(CUcontext context) {
  if (!state().initialized) return kNotInitialized;
  current_context = context;
  return kSuccess;
}

CUresult cuMemAlloc_v2(CUdeviceptr* dptr, size_t bytes) {
  if (dptr == nullptr || bytes == 0) return kInvalidValue;
  if (!state().initialized) return kNotInitialized;
  if (current_context == nullptr) return kInvalidContext;
  constexpr size_t kGranularity = size_t{2} << 20;  // the driver hands out 2 MiB-aligned chunks
  const size_t size = (bytes + kGranularity - 1) & ~(kGranularity - 1);
  if (use_vgem()) {
    VgemBuffer b;
    if (!vgem_alloc(size, &b)) return kOutOfMemory;
    State& s = state();
    std::lock_guard lock(s.mu);
    s.allocations.push_back({reinterpret_cast<CUdeviceptr>(b.addr), size, current_context->device, -1, b});
    *dptr = reinterpret_cast<CUdeviceptr>(b.addr);
    return kSuccess;
  }
  int fd = memfd_create("fake-cuda-device-memory", MFD_CLOEXEC);
  if (fd < 0) return kOutOfMemory;
  if (ftruncate(fd, static_cast<off_t>(size)) != 0) {
    close(fd);
    return kOutOfMemory;
  }
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    close(fd);
    return kOutOfMemory;
  }
  State& s = state();
  std::lock_guard lock(s.mu);
  s.allocations.push_back({reinterpret_cast<CUdeviceptr>(p), size, current_context->device, fd, {}});
  *dptr = reinterpret_cast<CUdeviceptr>(p);
  return kSuccess;
}

CUresult cuMemFree_v2(CUdeviceptr dptr) {
  State& s = state();
  std::lock_guard lock(s.mu);
  for (auto it = s.allocations.begin(); it != s.allocations.end(); ++it) {
    if (it->base != dptr) continue;
    if (it->vgem.addr != nullptr) {
      vgem_free(it->vgem);
    } else {
      munmap(reinterpret_cast<void*>(it->base), it->size);
      close(it->memfd);
    }
    s.allocations.erase(it);
    return kSuccess;
  }
  return kInvalidValue;
}

CUresult cuPointerGetAttribute(void* data, int attribute, CUdeviceptr ptr) {
  if (data == nullptr) return kInvalidValue;
  State& s = state();
  std::lock_guard lock(s.mu);
  if (!s.initialized) return kNotInitialized;
  const Allocation* a = find_locked(s, ptr);
  if (a == nullptr) return kInvalidValue;  // host memory the driver does not know
  switch (attribute) {
    case kPointerAttributeMemoryType: *static_cast<unsigned*>(data) = kMemoryTypeDevice; return kSuccess;
    case kPointerAttributeDeviceOrdinal: *static_cast<int*>(data) = a->device; return kSuccess;
    default: return kInvalidValue;  // not modelled
  }
}

CUresult cuMemGetAddressRange_v2(CUdeviceptr* base, size_t* size, CUdeviceptr dptr) {
  State& s = state();
  std::lock_guard lock(s.mu);
  if (!s.initialized) return kNotInitialized;
  const Allocation* a = find_locked(s, dptr);
  if (a == nullptr) return kNotFound;
  if (base != nullptr) *base = a->base;
  if (size != nullptr) *size = a->size;
  return kSuccess;
}

CUresult cuMemGetHandleForAddressRange(void* handle, CUdeviceptr dptr, size_t size, int handle_type,
                                       unsigned long long flags) {
  if (handle == nullptr || handle_type != kMemRangeHandleTypeDmaBufFd ||
      (flags & ~kMemRangeFlagDmaBufMappingTypePcie) != 0)
    return kInvalidValue;
  if (size == 0 || dptr % host_page() != 0 || size % host_page() != 0) return kInvalidValue;
  State& s = state();
  std::lock_guard lock(s.mu);
  if (!s.initialized) return kNotInitialized;
  const Allocation* a = find_locked(s, dptr);
  if (a == nullptr || size > a->size - (dptr - a->base)) return kInvalidValue;
  if (env_int("RDMAD_FAKE_CUDA_DMABUF", 1) == 0) return kNotSupported;
  if (s.fail_next_export != kSuccess) {
    CUresult r = s.fail_next_export;
    s.fail_next_export = kSuccess;
    return r;
  }
  int fd = -1;
  if (a->vgem.addr != nullptr) {
    if (dptr != a->base) return kNotSupported;  // vgem exports whole buffers
    fd = vgem_export(a->vgem);
    if (fd < 0) return kOutOfMemory;
  } else {
    fd = memfd_create("fake-cuda-dmabuf", MFD_CLOEXEC);
    if (fd < 0) return kOutOfMemory;
    if (ftruncate(fd, static_cast<off_t>(size)) != 0) {
      close(fd);
      return kOutOfMemory;
    }
  }
  ++s.exports;
  s.last_export_base = dptr;
  s.last_export_size = size;
  *static_cast<int*>(handle) = fd;
  return kSuccess;
}

}  // extern "C"

namespace {

// Symbols by name and the CUDA version that introduced each (the driver's versioned lookup:
// "cuMemAlloc" asked for at >= 3020 is cuMemAlloc_v2).
struct Symbol {
  std::string_view name;
  int since;
  void* fn;
};

const Symbol kSymbols[] = {
    {"cuInit", 2000, reinterpret_cast<void*>(&cuInit)},
    {"cuDriverGetVersion", 2020, reinterpret_cast<void*>(&cuDriverGetVersion)},
    {"cuGetErrorName", 6000, reinterpret_cast<void*>(&cuGetErrorName)},
    {"cuDeviceGetCount", 2000, reinterpret_cast<void*>(&cuDeviceGetCount)},
    {"cuDeviceGet", 2000, reinterpret_cast<void*>(&cuDeviceGet)},
    {"cuDeviceGetAttribute", 2000, reinterpret_cast<void*>(&cuDeviceGetAttribute)},
    {"cuDeviceGetPCIBusId", 4010, reinterpret_cast<void*>(&cuDeviceGetPCIBusId)},
    {"cuDevicePrimaryCtxRetain", 7000, reinterpret_cast<void*>(&cuDevicePrimaryCtxRetain)},
    {"cuCtxSetCurrent", 4000, reinterpret_cast<void*>(&cuCtxSetCurrent)},
    {"cuMemAlloc", 3020, reinterpret_cast<void*>(&cuMemAlloc_v2)},
    {"cuMemFree", 3020, reinterpret_cast<void*>(&cuMemFree_v2)},
    {"cuPointerGetAttribute", 4000, reinterpret_cast<void*>(&cuPointerGetAttribute)},
    {"cuMemGetAddressRange", 3020, reinterpret_cast<void*>(&cuMemGetAddressRange_v2)},
    {"cuMemGetHandleForAddressRange", 11070, reinterpret_cast<void*>(&cuMemGetHandleForAddressRange)},
};

CUresult lookup(const char* symbol, void** fn, int cuda_version, int* status) {
  if (symbol == nullptr || fn == nullptr) return kInvalidValue;
  *fn = nullptr;
  int result = kProcAddressSymbolNotFound;
  for (const Symbol& s : kSymbols) {
    if (s.name != symbol || s.since > driver_version()) continue;  // this driver predates it
    result = s.since > cuda_version ? kProcAddressVersionNotSufficient : kProcAddressSuccess;
    if (result == kProcAddressSuccess) *fn = s.fn;
  }
  if (status != nullptr) *status = result;
  return result == kProcAddressSuccess ? kSuccess : kNotFound;
}

}  // namespace

extern "C" {

CUresult cuGetProcAddress(const char* symbol, void** fn, int cuda_version, unsigned long long /*flags*/) {
  return lookup(symbol, fn, cuda_version, nullptr);
}

#if !defined(RDMAD_FAKE_CUDA_11)
CUresult cuGetProcAddress_v2(const char* symbol, void** fn, int cuda_version, unsigned long long /*flags*/,
                             int* status) {
  return lookup(symbol, fn, cuda_version, status);
}
#endif

// Test hooks. Number of dma-buf exports so far, and the range of the last one.
int rdmad_fake_cuda_exports(unsigned long long* last_base, unsigned long long* last_size) {
  State& s = state();
  std::lock_guard lock(s.mu);
  if (last_base != nullptr) *last_base = s.last_export_base;
  if (last_size != nullptr) *last_size = s.last_export_size;
  return s.exports;
}

// Makes the next otherwise successful cuMemGetHandleForAddressRange return `result`.
void rdmad_fake_cuda_fail_next_export(int result) {
  State& s = state();
  std::lock_guard lock(s.mu);
  s.fail_next_export = result;
}

}  // extern "C"
