// Shared-memory rings of a flow (docs/protocol.md, "Flow rings"). The daemon creates one memfd per
// flow holding a header, the submission ring (client → daemon) and the completion ring (daemon →
// client), and hands it to the client with two eventfds: the doorbell (client → daemon) and the
// completion fd (daemon → client). Each ring has one producer and one consumer; head and tail live
// on their own cache lines. A busy flow needs no system call: the producer writes a doorbell only
// when the consumer said it is going to sleep (`daemon_idle` / `client_armed`), in the classic
// store-flag / load-index order, so no wake-up is lost.
//
// The daemon never trusts the client's side of the memory: an index that moves backwards or runs
// more than a ring ahead, or an entry that does not validate, fails the flow, never the daemon.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace rdmad::ring {

inline constexpr uint32_t kMagic = 0x474e5246;  // "FRNG" in memory order
inline constexpr uint32_t kLayoutVersion = 1;
inline constexpr size_t kCacheLine = 64;

enum class Op : uint8_t {
  kWrite = 1,  // local registration → remote (imported) memory
  kRead = 2,   // remote (imported) memory → local registration
  kSend = 3,   // local registration → the next receive the peer posted on the same channel
  kRecv = 4,   // post a local buffer for one send from the peer
};

/// One request (submission queue entry).
struct Sqe {
  uint8_t op;  // Op
  uint8_t flags;
  uint16_t reserved0;
  uint32_t reserved1;
  uint64_t wr_id;          // the caller's id, returned in the completion
  uint64_t local_handle;   // a registration of this client
  uint64_t local_offset;   // bytes into it
  uint64_t remote_handle;  // kWrite/kRead: an imported remote handle; else 0
  uint64_t remote_offset;  // bytes into the exported range
  uint64_t length;         // bytes
  uint64_t reserved2;
};
static_assert(sizeof(Sqe) == 64);

/// One completion (completion queue entry).
struct Cqe {
  uint64_t wr_id;
  uint64_t length;  // bytes moved (kRecv: the size of the send received)
  int32_t status;   // rdmad_status
  uint8_t op;       // Op of the request
  uint8_t reserved0[3];
  uint64_t reserved1;
};
static_assert(sizeof(Cqe) == 32);

/// At offset 0 of the memfd. Indices are free-running uint32 (slot = index & (depth - 1)).
struct alignas(kCacheLine) Header {
  // Line 0: written once by the daemon before the memfd is handed out.
  uint32_t magic;
  uint32_t version;
  uint32_t sq_depth;  // powers of two
  uint32_t cq_depth;
  uint64_t flow_id;
  uint64_t sq_offset;  // bytes from the start of the mapping
  uint64_t cq_offset;
  uint64_t total_bytes;
  uint8_t pad0[kCacheLine - 48];
  // Line 1: client-owned.
  alignas(kCacheLine) std::atomic<uint32_t> sq_tail;  // next entry the client writes
  // Line 2: daemon-owned.
  alignas(kCacheLine) std::atomic<uint32_t> sq_head;  // next entry the daemon reads
  std::atomic<uint32_t> daemon_idle;                  // 1: the daemon sleeps: ring the doorbell
  // Line 3: daemon-owned.
  alignas(kCacheLine) std::atomic<uint32_t> cq_tail;
  std::atomic<uint32_t> flow_state;  // FlowState, for the client's information
  // Line 4: client-owned.
  alignas(kCacheLine) std::atomic<uint32_t> cq_head;
  std::atomic<uint32_t> client_armed;  // 1: the client waits on the completion fd
};
static_assert(sizeof(Header) == 5 * kCacheLine);
static_assert(std::atomic<uint32_t>::is_always_lock_free, "the rings are shared between processes");

enum class FlowState : uint32_t { kConnecting = 0, kConnected = 1, kDisconnected = 2, kFailed = 3 };

/// Byte layout of a flow mapping with the given depths.
struct Layout {
  uint64_t sq_offset;
  uint64_t cq_offset;
  uint64_t total_bytes;  // rounded up to a 4 KiB page
};
constexpr Layout layout_for(uint32_t sq_depth, uint32_t cq_depth) {
  uint64_t sq = sizeof(Header);
  uint64_t cq = sq + uint64_t{sq_depth} * sizeof(Sqe);
  uint64_t end = cq + uint64_t{cq_depth} * sizeof(Cqe);
  return Layout{sq, cq, (end + 4095) & ~uint64_t{4095}};
}

constexpr bool is_power_of_two(uint32_t v) { return v != 0 && (v & (v - 1)) == 0; }

/// Initialises a freshly mapped (zeroed) region of layout_for(sq_depth, cq_depth).total_bytes.
inline void init_header(void* base, uint64_t flow_id, uint32_t sq_depth, uint32_t cq_depth) {
  auto* h = static_cast<Header*>(base);
  Layout l = layout_for(sq_depth, cq_depth);
  h->magic = kMagic;
  h->version = kLayoutVersion;
  h->sq_depth = sq_depth;
  h->cq_depth = cq_depth;
  h->flow_id = flow_id;
  h->sq_offset = l.sq_offset;
  h->cq_offset = l.cq_offset;
  h->total_bytes = l.total_bytes;
}

/// True when a mapping of `bytes` holds a header this code understands (the client checks this
/// before using a mapping the daemon sent).
inline bool header_valid(const void* base, uint64_t bytes) {
  const auto* h = static_cast<const Header*>(base);
  if (bytes < sizeof(Header) || h->magic != kMagic || h->version != kLayoutVersion) return false;
  if (!is_power_of_two(h->sq_depth) || !is_power_of_two(h->cq_depth)) return false;
  Layout l = layout_for(h->sq_depth, h->cq_depth);
  return h->sq_offset == l.sq_offset && h->cq_offset == l.cq_offset && h->total_bytes == l.total_bytes &&
         l.total_bytes <= bytes;
}

/// Single-producer side of a ring of T. `tail` is the producer's index, `head` the consumer's.
template <class T>
class Producer {
 public:
  Producer() = default;
  Producer(T* slots, uint32_t depth, std::atomic<uint32_t>* tail, std::atomic<uint32_t>* head)
      : slots_(slots),
        mask_(depth - 1),
        tail_(tail),
        head_(head),
        local_tail_(tail->load(std::memory_order_relaxed)),
        cached_head_(head->load(std::memory_order_acquire)) {}

  /// Free slots, as far as the producer can tell (refreshes the consumer's head only when needed).
  uint32_t free_slots(uint32_t wanted = 1) {
    uint32_t used = local_tail_ - cached_head_;
    if (used > mask_ + 1 || mask_ + 1 - used < wanted) {
      cached_head_ = head_->load(std::memory_order_acquire);
      used = local_tail_ - cached_head_;
    }
    // A consumer that ran ahead of us (a broken peer) shows as "full": nothing is overwritten.
    return used > mask_ + 1 ? 0 : mask_ + 1 - used;
  }
  /// The next slot to fill, or nullptr when the ring is full.
  T* claim() { return free_slots() == 0 ? nullptr : &slots_[local_tail_ & mask_]; }
  /// Makes the claimed slots visible (one release store for a batch). seq_cst so that the
  /// consumer's idle flag is read after it (see needs_doorbell()).
  void commit(uint32_t n = 1) {
    local_tail_ += n;
    tail_->store(local_tail_, std::memory_order_seq_cst);
  }
  /// Claims, fills and commits one entry; false when full.
  bool push(const T& v) {
    T* slot = claim();
    if (slot == nullptr) return false;
    *slot = v;
    commit();
    return true;
  }
  uint32_t tail() const { return local_tail_; }

 private:
  T* slots_ = nullptr;
  uint32_t mask_ = 0;
  std::atomic<uint32_t>* tail_ = nullptr;
  std::atomic<uint32_t>* head_ = nullptr;
  uint32_t local_tail_ = 0;
  uint32_t cached_head_ = 0;
};

/// Single-consumer side of a ring of T.
template <class T>
class Consumer {
 public:
  Consumer() = default;
  Consumer(const T* slots, uint32_t depth, std::atomic<uint32_t>* tail, std::atomic<uint32_t>* head)
      : slots_(slots),
        mask_(depth - 1),
        tail_(tail),
        head_(head),
        local_head_(head->load(std::memory_order_relaxed)),
        cached_tail_(local_head_) {}

  /// Entries ready to read; UINT32_MAX when the producer's index is impossible (moved backwards or
  /// more than a ring ahead): the peer is broken.
  uint32_t available() {
    uint32_t t = tail_->load(std::memory_order_acquire);
    uint32_t n = t - local_head_;
    return n > mask_ + 1 ? UINT32_MAX : n;
  }
  /// Copies the next entry out (so a changing shared slot cannot change what was validated); false
  /// when empty or broken.
  bool pop(T& out) {
    if (local_head_ == cached_tail_) {
      uint32_t n = available();
      if (n == 0 || n == UINT32_MAX) return false;
      cached_tail_ = local_head_ + n;
    }
    out = slots_[local_head_ & mask_];
    ++local_head_;
    return true;
  }
  /// Publishes how far the consumer has read (once per batch).
  void release() { head_->store(local_head_, std::memory_order_release); }
  uint32_t head() const { return local_head_; }

 private:
  const T* slots_ = nullptr;
  uint32_t mask_ = 0;
  std::atomic<uint32_t>* tail_ = nullptr;
  std::atomic<uint32_t>* head_ = nullptr;
  uint32_t local_head_ = 0;
  uint32_t cached_tail_ = 0;
};

/// After commit(): whether the consumer announced it sleeps, so the producer must ring its fd.
/// A true answer also clears the flag: one doorbell wakes the consumer, and the commits that follow
/// before it runs again need none (otherwise a producer rings on every entry, up to a whole ring,
/// while a slow-to-wake consumer is scheduled back in). The plain load keeps the busy path free
/// of writes to the consumer's cache line.
inline bool needs_doorbell(std::atomic<uint32_t>& sleeping_flag) {
  return sleeping_flag.load(std::memory_order_seq_cst) != 0 &&
         sleeping_flag.exchange(0, std::memory_order_seq_cst) != 0;
}

/// The consumer's side of going to sleep: announce, then look once more. Returns true when work
/// arrived meanwhile (the flag is cleared again and the caller must not sleep).
inline bool prepare_sleep(std::atomic<uint32_t>& sleeping_flag, std::atomic<uint32_t>& producer_tail,
                          uint32_t consumer_head) {
  sleeping_flag.store(1, std::memory_order_seq_cst);
  if (producer_tail.load(std::memory_order_seq_cst) != consumer_head) {
    sleeping_flag.store(0, std::memory_order_relaxed);
    return true;
  }
  return false;
}

/// Typed views of a flow mapping. The layout comes from the depths the caller trusts (the daemon
/// its own, the client the validated header), never from offsets read back from shared memory.
inline Sqe* sq_slots(void* base, const Layout& l) {
  return reinterpret_cast<Sqe*>(static_cast<char*>(base) + l.sq_offset);
}
inline Cqe* cq_slots(void* base, const Layout& l) {
  return reinterpret_cast<Cqe*>(static_cast<char*>(base) + l.cq_offset);
}

}  // namespace rdmad::ring
