// The versioned tables NCCL looks up (ncclNetPlugin_v10, _v9, _v8), each a thin layer over Plugin.
#include <vector>

#include "plugin.h"

namespace {

using namespace rdmad::nccl;
using abi::Result;

Plugin& P() { return Plugin::get(); }

Result init_v8(abi::Logger log) { return P().init(log); }
Result init_v10(abi::Logger log, abi::ProfilerCallback) { return P().init(log); }
Result devices(int* n) { return P().devices(n); }
Result properties_v9(int dev, abi::PropertiesV9* p) { return P().properties(dev, p); }
Result properties_v8(int dev, abi::PropertiesV8* p) {
  abi::PropertiesV9 q{};
  Result r = P().properties(dev, &q);
  if (r != abi::kSuccess) return r;
  *p = abi::PropertiesV8{q.name,  q.pci_path,  q.guid,      q.ptr_support, q.reg_is_global, q.speed,
                         q.port,  q.latency,   q.max_comms, q.max_recvs,   q.device_type,   q.device_version};
  return r;
}
Result listen(int dev, void* handle, void** l) { return P().listen(dev, handle, l); }
Result connect_v8(int dev, void* handle, void** s, abi::DeviceHandle**) { return P().connect(dev, handle, s); }
Result connect_v10(int dev, abi::CommConfigV10*, void* handle, void** s, abi::DeviceHandle**) {
  return P().connect(dev, handle, s);
}
Result accept(void* l, void** r, abi::DeviceHandle**) { return P().accept(l, r); }
Result reg_mr(void* c, void* d, size_t n, int type, void** m) { return P().reg_mr(c, d, n, type, m); }
Result reg_mr_dmabuf(void* c, void* d, size_t n, int type, uint64_t off, int fd, void** m) {
  return P().reg_mr_dmabuf(c, d, n, type, off, fd, m);
}
Result dereg_mr(void* c, void* m) { return P().dereg_mr(c, m); }
Result isend_v8(void* c, void* d, int n, int tag, void* m, void** r) {
  if (n < 0) return abi::kInternalError;
  return P().isend(c, d, static_cast<size_t>(n), tag, m, r);
}
Result isend_v9(void* c, void* d, size_t n, int tag, void* m, void** r) { return P().isend(c, d, n, tag, m, r); }
Result isend_v10(void* c, void* d, size_t n, int tag, void* m, void*, void** r) { return P().isend(c, d, n, tag, m, r); }
Result irecv_v8(void* c, int n, void** d, int* sizes, int* tags, void** m, void** r) {
  if (n < 1 || n > kMaxRecvs) return abi::kInternalError;
  size_t s[kMaxRecvs];
  for (int i = 0; i < n; ++i) {
    if (sizes[i] < 0) return abi::kInternalError;
    s[i] = static_cast<size_t>(sizes[i]);
  }
  return P().irecv(c, n, d, s, tags, m, r);
}
Result irecv_v9(void* c, int n, void** d, size_t* sizes, int* tags, void** m, void** r) {
  return P().irecv(c, n, d, sizes, tags, m, r);
}
Result irecv_v10(void* c, int n, void** d, size_t* sizes, int* tags, void** m, void**, void** r) {
  return P().irecv(c, n, d, sizes, tags, m, r);
}
Result iflush(void* c, int n, void** d, int* sizes, void** m, void** r) { return P().iflush(c, n, d, sizes, m, r); }
Result test(void* r, int* done, int* sizes) { return P().test(r, done, sizes); }
Result close_comm(void* c) { return P().close_comm(c); }
Result close_listen(void* l) { return P().close_listen(l); }
Result make_vdevice(int* d, abi::VDeviceProps* p) { return P().make_vdevice(d, p); }

}  // namespace

extern "C" {

__attribute__((visibility("default"))) abi::NetV8 ncclNetPlugin_v8 = {
    "rdmad", init_v8, devices, properties_v8, listen, connect_v8, accept, reg_mr, reg_mr_dmabuf, dereg_mr,
    isend_v8, irecv_v8, iflush, test, close_comm, close_comm, close_listen, nullptr, nullptr};

__attribute__((visibility("default"))) abi::NetV9 ncclNetPlugin_v9 = {
    "rdmad", init_v8, devices, properties_v9, listen, connect_v8, accept, reg_mr, reg_mr_dmabuf, dereg_mr,
    isend_v9, irecv_v9, iflush, test, close_comm, close_comm, close_listen, nullptr, nullptr, make_vdevice};

__attribute__((visibility("default"))) abi::NetV10 ncclNetPlugin_v10 = {
    "rdmad", init_v10, devices, properties_v9, listen, connect_v10, accept, reg_mr, reg_mr_dmabuf, dereg_mr,
    isend_v10, irecv_v10, iflush, test, close_comm, close_comm, close_listen, nullptr, nullptr, make_vdevice};

}  // extern "C"
