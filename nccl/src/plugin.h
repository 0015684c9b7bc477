// The rdmad NCCL net plugin: NCCL's network transport API on librdmad flows. One version-neutral
// implementation (sizes as size_t) behind the per-version tables of exports.cc.
//
// Mapping (docs/nccl.md):
// - a device is the node (every rail, striped by the daemon: RDMAD_NCCL_DEVICES=node, the default)
//   or one rdmad NIC (RDMAD_NCCL_DEVICES=nic, so NCCL picks rails by GPU locality);
// - a send comm and its recv comm are flows between the two nodes, one per tag, on a channel named
//   by the comm's random id and the tag: NCCL matches a multi-receive's buffers to sends by tag, and
//   sends of one tag arrive in order, which is what a flow's SEND/RECV pairing gives;
// - isend is a flow SEND, irecv posts one flow RECV per buffer; GPU memory is registered through
//   dma-buf and moved without a copy; host memory (NCCL allocates it, so no memfd backs it) goes
//   through the plugin's staging buffers, one copy on each side, unless a sealed memfd of the
//   process's backs it (host_memfd.h): then it is registered as it is, like GPU memory.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "abi.h"
#include "rdmad/rdmad.h"
#include "rendezvous.h"
#include "staging.h"

namespace rdmad::nccl {

inline constexpr int kMaxRecvs = 8;

struct Device {
  std::string name;
  std::string pci_path;  // "" for none (a software NIC, or the node device)
  uint64_t guid = 0;
  int speed_mbps = 0;
  uint32_t nic_mask = 0;  // 0: every NIC of the node
  int ptr_support = abi::kPtrHost;
  std::vector<int> members;  // a merged (virtual) device's devices; empty for a device of its own
};

struct MemHandle {
  uintptr_t base = 0;
  size_t size = 0;
  int type = abi::kPtrHost;
  rdmad_mr* mr = nullptr;  // nullptr: host memory, staged (a sealed memfd's has one: host_memfd.h)
};

struct Comm;
struct Request;

struct Sub;

struct Stream {
  int tag = 0;
  rdmad_flow* flow = nullptr;
  std::deque<Sub*> unposted;  // in order: a flow's sends and receives pair in posting order
};

struct Sub {
  Request* req = nullptr;
  Stream* stream = nullptr;
  uint8_t* user = nullptr;  // the caller's buffer (a staged receive is copied here)
  const MemHandle* mem = nullptr;
  size_t size = 0;          // send: the bytes sent; receive: the buffer's size
  size_t bytes = 0;         // what the completion says moved
  Staging* staging = nullptr;
  bool posted = false;
  bool complete = false;
  rdmad_status status = RDMAD_OK;
};

struct Request {
  Comm* comm = nullptr;
  bool recv = false;
  bool in_use = false;
  bool abandoned = false;  // reported failed while parts were still in the daemon
  int n = 0;
  int remaining = 0;
  std::array<Sub, kMaxRecvs> subs{};
};

struct Comm {
  bool send = false;
  int dev = 0;
  std::string peer;
  uint64_t comm_id = 0;
  int socket = -1;  // the rendezvous connection, kept as the other process's sign of life
  std::map<int, std::unique_ptr<Stream>> streams;
  std::vector<std::unique_ptr<Request>> requests;
  std::string failed;  // set once the comm is broken: every request after it fails
  Clock::time_point next_liveness{};
  Clock::time_point peer_gone{};  // when the other rank's end of the rendezvous connection closed
  // What test() reported done, for the close line: messages, their bytes, and the bytes of them
  // that were copied through staging buffers (host memory).
  uint64_t messages = 0, bytes = 0, staged_bytes = 0;
};

struct ListenComm {
  int dev = 0;
  Listener listener;
  uint64_t comm_id = 0;
  // A rendezvous done whose flow is not connected yet (accept returns it when it is).
  std::unique_ptr<Comm> connecting;
};

// A connect in progress, found again through its handle's stage_id.
struct ConnectStage {
  uint8_t identity[kHandleIdentityBytes];  // the handle's bytes the listener wrote: the same handle?
  Connecting rendezvous;
  std::unique_ptr<Comm> comm;  // after the rendezvous: waiting for the flow
};

class Plugin {
 public:
  abi::Result init(abi::Logger log);
  abi::Result devices(int* n);
  abi::Result properties(int dev, abi::PropertiesV9* p);
  abi::Result listen(int dev, void* handle, void** listen_comm);
  abi::Result connect(int dev, void* handle, void** send_comm);
  abi::Result accept(void* listen_comm, void** recv_comm);
  abi::Result reg_mr(void* comm, void* data, size_t size, int type, void** mhandle);
  abi::Result reg_mr_dmabuf(void* comm, void* data, size_t size, int type, uint64_t offset, int fd, void** mhandle);
  abi::Result dereg_mr(void* comm, void* mhandle);
  abi::Result isend(void* send_comm, void* data, size_t size, int tag, void* mhandle, void** request);
  abi::Result irecv(void* recv_comm, int n, void** data, const size_t* sizes, const int* tags, void** mhandles,
                    void** request);
  abi::Result iflush(void* recv_comm, int n, void** data, int* sizes, void** mhandles, void** request);
  abi::Result test(void* request, int* done, int* sizes);
  abi::Result close_comm(void* comm);
  abi::Result close_listen(void* listen_comm);
  abi::Result make_vdevice(int* dev, abi::VDeviceProps* props);

  static Plugin& get();

 private:
  void log(abi::LogLevel level, const char* fmt, ...) const __attribute__((format(printf, 3, 4)));
  abi::Result fail(abi::Result r, const std::string& what) const;
  abi::Result open_stream(Comm& c, int tag, Stream** out);
  bool comm_ready(Comm& c, std::string* error);
  std::unique_ptr<Comm> make_comm(bool send, int dev, std::string peer, uint64_t comm_id, int socket);
  void progress(Comm& c);
  void close_streams(Comm& c);
  // Posts `s` (or queues it behind its stream's backlog); false with the comm failed on an error.
  bool post(Comm& c, Sub& s);
  bool post_now(Comm& c, Sub& s, bool* full);
  Request* new_request(Comm& c);
  void finish(Request* r);
  abi::Result request_error(Request* r);
  static uint64_t channel_of(uint64_t comm_id, int tag);
  ConnectStage* stage_of(const WireHandle& h);
  void drop_stage(WireHandle* h);

  std::mutex mu_;
  abi::Logger log_ = nullptr;
  rdmad_client* client_ = nullptr;
  std::string node_;
  std::vector<Device> devices_;
  std::unique_ptr<StagingPool> staging_;
  bool staging_told_ = false;  // the once-per-process note that host memory is copied
  // Connects in progress by stage id (bounded: NCCL abandons one only when it gives up on the job).
  static constexpr size_t kMaxConnecting = 4096;
  std::map<uint64_t, std::unique_ptr<ConnectStage>> connecting_;
  sockaddr_storage address_{};
  std::string interface_;
  int init_result_ = -1;  // -1: not yet
};

}  // namespace rdmad::nccl
