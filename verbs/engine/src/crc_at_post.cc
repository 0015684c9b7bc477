// Payload CRCs computed by the posting thread (the crc_at_post option). At 1 MiB the requester's
// datapath thread spends about a tenth of its cycles on ICRCs; the thread that posts a large SEND
// or WRITE does that part instead, and the datapath combines each segment's CRC with its headers'
// (roce::Crc32Shift) on the first transmission.
//
// The posting thread reads application memory outside the datapath, so it must never read a
// region being deregistered. It raises PostCrcRing::reading (odd) before it checks the key and
// drops it after the last read; remove_mr clears the key and then calls wait_posts, which waits out every odd `reading` it sees before the caller may unmap. Both sides
// are sequentially consistent, so either the poster sees the cleared key or the deregistering
// thread sees the poster's odd count (Dekker).
#include <sched.h>

#include <chrono>
#include <thread>

#include "datapath.h"

namespace rdmad::verbs::engine {

void Nic::crc_at_post(QpShared& s, const SendWr& wr, PostCrc* pc) {
  *pc = PostCrc{};
  if (!config_.crc_at_post || wr.sge.length < kCrcAtPostMinBytes) return;
  if (wr.opcode == WrOpcode::kRdmaRead) return;
  const uint32_t mtu = s.mtu.load(std::memory_order_relaxed);  // read after the state (acquire)
  if (mtu == 0) return;
  PostCrcRing& r = s.crc_ring;
  const uint64_t free = PostCrcRing::kEntries - (r.tail - r.head.load(std::memory_order_acquire));
  const uint32_t count = static_cast<uint32_t>(std::min<uint64_t>(wr.sge.length / mtu, free));
  if (count == 0) return;
  if (!r.crcs) r.crcs = std::make_unique<uint32_t[]>(PostCrcRing::kEntries);

  r.reading.fetch_add(1, std::memory_order_seq_cst);
  MrView mr;
  const bool valid = find_mr(wr.sge.lkey, &mr) && covers(mr, wr.sge.addr, wr.sge.length);
  if (valid) {
    const auto* p = reinterpret_cast<const uint8_t*>(wr.sge.addr);
    for (uint32_t k = 0; k < count; ++k) r.at(r.tail + k) = roce::crc32_update(0, {p + uint64_t{k} * mtu, mtu});
    *pc = {r.tail, count, mtu};
    r.tail += count;
  }
  r.reading.fetch_add(1, std::memory_order_release);
}

void Nic::wait_posts(const std::vector<std::shared_ptr<QpShared>>& qps) {
  for (const auto& q : qps) {
    const uint64_t seen = q->crc_ring.reading.load(std::memory_order_seq_cst);
    if ((seen & 1) == 0) continue;
    // One post's CRCs take microseconds to a millisecond. Yield at first; then sleep between
    // looks, so that a poster of lower priority on this core is not starved by a yielding waiter.
    for (int looks = 0; q->crc_ring.reading.load(std::memory_order_acquire) == seen; ++looks) {
      if (looks < 64) {
        sched_yield();
      } else {
        std::this_thread::sleep_for(std::chrono::microseconds(20));
      }
    }
  }
}

}  // namespace rdmad::verbs::engine
