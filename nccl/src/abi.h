// NCCL's network plugin ABI, versions 8, 9 and 10, declared here from the layout NCCL documents for
// external network plugins (NCCL's ext-net documentation and its per-version declarations): NCCL
// dlopens libnccl-net-<NCCL_NET_PLUGIN>.so and looks up `ncclNetPlugin_v<N>`, newest first.
// Only the plugin's own translation units include this; none of it is librdmad's API.
#pragma once

#include <cstddef>
#include <cstdint>

namespace rdmad::nccl::abi {

// ncclResult_t: the values NCCL's plugins may return.
enum Result : int {
  kSuccess = 0,
  kUnhandledCudaError = 1,
  kSystemError = 2,
  kInternalError = 3,
  kInvalidArgument = 4,
  kInvalidUsage = 5,
  kRemoteError = 6,
};

enum LogLevel : int { kLogNone = 0, kLogVersion = 1, kLogWarn = 2, kLogInfo = 3, kLogAbort = 4, kLogTrace = 5 };
inline constexpr unsigned long kSubsysInit = 1;
inline constexpr unsigned long kSubsysNet = 16;
inline constexpr unsigned long kSubsysAll = ~0ul;
using Logger = void (*)(LogLevel level, unsigned long flags, const char* file, int line, const char* fmt, ...);
using ProfilerCallback = Result (*)(void** event, int type, void* phandle, int64_t plugin_id, void* ext);

inline constexpr size_t kHandleMaxBytes = 128;  // NCCL_NET_HANDLE_MAXSIZE
inline constexpr int kPtrHost = 0x1;
inline constexpr int kPtrCuda = 0x2;
inline constexpr int kPtrDmabuf = 0x4;
inline constexpr int kMaxRequests = 32;  // NCCL_NET_MAX_REQUESTS: per comm, times maxRecvs on a send comm
inline constexpr int kMaxDevsPerNic = 4;  // NCCL_NET_MAX_DEVS_PER_NIC (v9, v10)

enum DeviceType : int { kDeviceHost = 0, kDeviceUnpack = 1 };

// Device offload handle (same layout v7..v10); rdmad offers no device offload and never fills it.
struct DeviceHandle {
  DeviceType type;
  int version;
  void* handle;
  size_t size;
  int needs_proxy_progress;
};

struct PropertiesV8 {
  char* name;
  char* pci_path;
  uint64_t guid;
  int ptr_support;
  int reg_is_global;
  int speed;  // Mb/s
  int port;
  float latency;  // µs
  int max_comms;
  int max_recvs;
  DeviceType device_type;
  int device_version;
};

struct VDeviceProps {
  int ndevs;
  int devs[kMaxDevsPerNic];
};

struct PropertiesV9 {
  char* name;
  char* pci_path;
  uint64_t guid;
  int ptr_support;
  int reg_is_global;
  int force_flush;
  int speed;
  int port;
  float latency;
  int max_comms;
  int max_recvs;
  DeviceType device_type;
  int device_version;
  VDeviceProps vprops;
  size_t max_p2p_bytes;
  size_t max_coll_bytes;
};
using PropertiesV10 = PropertiesV9;  // same layout in v10

struct CommConfigV10 {
  int traffic_class;  // -1: undefined
};

struct NetV8 {
  const char* name;
  Result (*init)(Logger);
  Result (*devices)(int* ndev);
  Result (*get_properties)(int dev, PropertiesV8* props);
  Result (*listen)(int dev, void* handle, void** listen_comm);
  Result (*connect)(int dev, void* handle, void** send_comm, DeviceHandle** send_dev_comm);
  Result (*accept)(void* listen_comm, void** recv_comm, DeviceHandle** recv_dev_comm);
  Result (*reg_mr)(void* comm, void* data, size_t size, int type, void** mhandle);
  Result (*reg_mr_dmabuf)(void* comm, void* data, size_t size, int type, uint64_t offset, int fd, void** mhandle);
  Result (*dereg_mr)(void* comm, void* mhandle);
  Result (*isend)(void* send_comm, void* data, int size, int tag, void* mhandle, void** request);
  Result (*irecv)(void* recv_comm, int n, void** data, int* sizes, int* tags, void** mhandles, void** request);
  Result (*iflush)(void* recv_comm, int n, void** data, int* sizes, void** mhandles, void** request);
  Result (*test)(void* request, int* done, int* sizes);
  Result (*close_send)(void* send_comm);
  Result (*close_recv)(void* recv_comm);
  Result (*close_listen)(void* listen_comm);
  Result (*get_device_mr)(void* comm, void* mhandle, void** dptr_mhandle);
  Result (*irecv_consumed)(void* recv_comm, int n, void* request);
};

struct NetV9 {
  const char* name;
  Result (*init)(Logger);
  Result (*devices)(int* ndev);
  Result (*get_properties)(int dev, PropertiesV9* props);
  Result (*listen)(int dev, void* handle, void** listen_comm);
  Result (*connect)(int dev, void* handle, void** send_comm, DeviceHandle** send_dev_comm);
  Result (*accept)(void* listen_comm, void** recv_comm, DeviceHandle** recv_dev_comm);
  Result (*reg_mr)(void* comm, void* data, size_t size, int type, void** mhandle);
  Result (*reg_mr_dmabuf)(void* comm, void* data, size_t size, int type, uint64_t offset, int fd, void** mhandle);
  Result (*dereg_mr)(void* comm, void* mhandle);
  Result (*isend)(void* send_comm, void* data, size_t size, int tag, void* mhandle, void** request);
  Result (*irecv)(void* recv_comm, int n, void** data, size_t* sizes, int* tags, void** mhandles, void** request);
  Result (*iflush)(void* recv_comm, int n, void** data, int* sizes, void** mhandles, void** request);
  Result (*test)(void* request, int* done, int* sizes);
  Result (*close_send)(void* send_comm);
  Result (*close_recv)(void* recv_comm);
  Result (*close_listen)(void* listen_comm);
  Result (*get_device_mr)(void* comm, void* mhandle, void** dptr_mhandle);
  Result (*irecv_consumed)(void* recv_comm, int n, void* request);
  Result (*make_vdevice)(int* dev, VDeviceProps* props);
};

struct NetV10 {
  const char* name;
  Result (*init)(Logger, ProfilerCallback);
  Result (*devices)(int* ndev);
  Result (*get_properties)(int dev, PropertiesV10* props);
  Result (*listen)(int dev, void* handle, void** listen_comm);
  Result (*connect)(int dev, CommConfigV10* config, void* handle, void** send_comm, DeviceHandle** send_dev_comm);
  Result (*accept)(void* listen_comm, void** recv_comm, DeviceHandle** recv_dev_comm);
  Result (*reg_mr)(void* comm, void* data, size_t size, int type, void** mhandle);
  Result (*reg_mr_dmabuf)(void* comm, void* data, size_t size, int type, uint64_t offset, int fd, void** mhandle);
  Result (*dereg_mr)(void* comm, void* mhandle);
  Result (*isend)(void* send_comm, void* data, size_t size, int tag, void* mhandle, void* phandle, void** request);
  Result (*irecv)(void* recv_comm, int n, void** data, size_t* sizes, int* tags, void** mhandles, void** phandles,
                  void** request);
  Result (*iflush)(void* recv_comm, int n, void** data, int* sizes, void** mhandles, void** request);
  Result (*test)(void* request, int* done, int* sizes);
  Result (*close_send)(void* send_comm);
  Result (*close_recv)(void* recv_comm);
  Result (*close_listen)(void* listen_comm);
  Result (*get_device_mr)(void* comm, void* mhandle, void** dptr_mhandle);
  Result (*irecv_consumed)(void* recv_comm, int n, void* request);
  Result (*make_vdevice)(int* dev, VDeviceProps* props);
};

// The documented layouts, pinned (x86-64 / aarch64 LP64).
static_assert(sizeof(PropertiesV8) == 64);
static_assert(sizeof(PropertiesV9) == 104);
static_assert(sizeof(NetV8) == 19 * sizeof(void*));
static_assert(sizeof(NetV9) == 20 * sizeof(void*));
static_assert(sizeof(NetV10) == 20 * sizeof(void*));

}  // namespace rdmad::nccl::abi
