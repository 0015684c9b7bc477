#pragma once
// The transport interface: device → protection domain → memory regions and queue pairs, plus
// completion queues. One implementation per backend (soft, rdma_core, ...).
//
// Ownership mirrors ibverbs: every object is a move-only owner. Destroy in the order
// QP → CQ → MR → PD → device (a backend may keep its shared state alive longer, never shorter).
// Thread rules: post_send on one QP from one thread at a time, post_recv likewise, poll on one CQ
// from one thread at a time; everything else (create, modify, destroy) from any thread.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "rdmad/base/heartbeat.h"
#include "rdmad/cc/dcqcn_params.h"
#include "rdmad/verbs/counters.h"
#include "rdmad/verbs/status.h"
#include "rdmad/verbs/types.h"

namespace rdmad::verbs {

/// A registration a backend holds as several MRs behind one handle (rdma_core splits those over
/// its per-MR limit): slice k covers bytes [k·slice_bytes, (k+1)·slice_bytes) and answers to
/// rkeys[k] only, so a peer needs every slice's rkey (rkeys are chosen by the NIC).
struct RemoteSlices {
  uint64_t slice_bytes = 0;
  std::vector<uint32_t> rkeys;  // slice 0 first
};

class MemoryRegion {
 public:
  virtual ~MemoryRegion() = default;
  virtual uint64_t addr() const = 0;
  virtual size_t length() const = 0;
  virtual uint32_t lkey() const = 0;
  virtual uint32_t rkey() const = 0;
  virtual uint32_t access() const = 0;
  /// The slices of a split registration; nullopt when rkey() covers it all. Setup path (allocates).
  virtual std::optional<RemoteSlices> remote_slices() const { return std::nullopt; }
};

class CompletionQueue {
 public:
  virtual ~CompletionQueue() = default;
  /// Moves up to out.size() completions into out; returns how many. Never blocks.
  virtual size_t poll(std::span<WorkCompletion> out) = 0;
  virtual uint32_t depth() const = 0;

  /// Completion notification (ibv_req_notify_cq with a completion channel), for consumers that
  /// sleep instead of spinning: after request_notify(), the next completion added to this queue
  /// makes notify_fd() readable (poll/epoll, POLLIN). As with ibverbs, poll() once more after
  /// request_notify() before sleeping (a completion that arrived before the request raises no
  /// event), and clear the fd with ack_notify() after waking. Spurious wake-ups can happen.
  /// -1 / kNotSupported where the backend has no notification.
  virtual int notify_fd() const { return -1; }
  virtual Status request_notify() { return Status::not_supported("completion notification"); }
  virtual void ack_notify() {}
};

class QueuePair {
 public:
  virtual ~QueuePair() = default;
  virtual uint32_t qp_num() const = 0;
  /// Applies the attributes selected by mask (QpAttrMask bits); follows the ibverbs state machine.
  virtual Status modify(const QpAttr& attr, uint32_t mask) = 0;
  /// Current attributes, including the state (which the backend may have moved to kError).
  virtual QpAttr query() const = 0;
  /// Posts a batch; returns ok when all were queued. On kNoResource (send queue full) *posted
  /// says how many of the batch went in. Errors found later complete with an error status.
  virtual Status post_send(std::span<const SendWr> wrs, size_t* posted = nullptr) = 0;
  /// Posts receive buffers; same contract as post_send.
  virtual Status post_recv(std::span<const RecvWr> wrs, size_t* posted = nullptr) = 0;
};

class ProtectionDomain {
 public:
  virtual ~ProtectionDomain() = default;
  /// Registers [addr, addr+length) with Access flags.
  virtual Result<std::unique_ptr<MemoryRegion>> reg_mr(void* addr, size_t length, uint32_t access) = 0;
  /// Registers a dma-buf (GPU memory exported by a client). kNotSupported where the backend
  /// cannot (advertised by Capabilities::dmabuf_mr).
  virtual Result<std::unique_ptr<MemoryRegion>> reg_dmabuf_mr(int fd, uint64_t offset, size_t length,
                                                              uint64_t iova, uint32_t access) = 0;
  /// Creates an RC queue pair in RESET.
  virtual Result<std::unique_ptr<QueuePair>> create_qp(const QpInitAttr& attr) = 0;
};

/// An asynchronous device event (ibverbs async events: port up/down, QP and CQ errors, device loss).
struct DeviceEvent {
  enum class Kind : uint8_t { kPortActive, kPortDown, kPortChanged, kQpFatal, kCqError, kDeviceFatal, kOther };
  Kind kind = Kind::kOther;
  uint8_t port = 0;     // port events
  uint32_t qp_num = 0;  // QP events
  std::string text;     // the backend's name for the event
};

/// One queue pair's DCQCN reaction-point state (the sender side), as of the moment it was read.
struct DcqcnSample {
  double rate_mbps = 0;    // Rc, the pacing rate
  double target_mbps = 0;  // Rt, the target rate
  double alpha = 0;        // α, decayed to the moment of the read
};

struct DeviceInfo {
  std::string name;     // "soft0", "mlx5_0", ...
  std::string backend;  // registry name
  uint8_t port_count = 1;
};

class Device {
 public:
  virtual ~Device() = default;
  virtual const DeviceInfo& info() const = 0;
  /// Port attributes (ports are numbered from 1 as in ibverbs).
  virtual Result<PortInfo> query_port(uint8_t port_num) const = 0;
  virtual Result<std::unique_ptr<ProtectionDomain>> alloc_pd() = 0;
  virtual Result<std::unique_ptr<CompletionQueue>> create_cq(uint32_t depth) = 0;
  /// Transport counters summed at read time.
  virtual NicCounters counters() const = 0;
  /// The DCQCN state of every QP in RTS, one sample per QP, brought up to date when called (control
  /// path: it may allocate and wait for the datapath). Hardware NICs keep this state in firmware
  /// and return none.
  virtual std::vector<DcqcnSample> dcqcn_samples() const { return {}; }
  /// A descriptor that becomes readable when device events are pending; -1 when the backend has
  /// no asynchronous events. The device keeps ownership.
  virtual int event_fd() const { return -1; }
  /// Reads every pending event without blocking.
  virtual std::vector<DeviceEvent> read_events() { return {}; }
  /// The DCQCN parameters the backend itself runs (software CC); nullopt where congestion control
  /// is the NIC firmware's business (hardware NICs are configured through nic_cc instead).
  virtual std::optional<cc::DcqcnParams> dcqcn_params() const { return std::nullopt; }
  /// Replaces them at run time: every queue pair's next CC event uses the new values (rates and
  /// alpha already reached are kept). kNotSupported where dcqcn_params() is nullopt.
  virtual Status set_dcqcn_params(const cc::DcqcnParams& params) {
    (void)params;
    return Status::not_supported("congestion control is not run by this backend");
  }
  /// The heartbeat of the thread the backend's datapath runs on (rdmad/base/heartbeat.h), which the
  /// daemon's watchdog reads; nullptr for a backend without a thread of its own (rdma_core: its
  /// datapath is the NIC, and completions are polled on their users' threads).
  virtual const base::Heartbeat* datapath_heartbeat() const { return nullptr; }
  /// Runs `fn` on that thread, inside a pass, and returns when it has run (the daemon's test hooks
  /// stall the datapath with it). kNotSupported where datapath_heartbeat() is nullptr.
  virtual Status run_on_datapath_for_test(const std::function<void()>& fn) {
    (void)fn;
    return Status::not_supported("this backend has no datapath thread");
  }
  /// Every datapath thread's heartbeat, where a backend runs several (the first is
  /// datapath_heartbeat()); empty where it runs none.
  virtual std::vector<const base::Heartbeat*> datapath_heartbeats() const {
    if (const base::Heartbeat* h = datapath_heartbeat()) return {h};
    return {};
  }
  /// run_on_datapath_for_test on datapath thread `i` (0: the one datapath_heartbeat() beats for).
  virtual Status run_on_datapath_thread_for_test(size_t i, const std::function<void()>& fn) {
    if (i == 0) return run_on_datapath_for_test(fn);
    return Status::not_supported("no such datapath thread");
  }
};

}  // namespace rdmad::verbs
