#pragma once
// FIFO of datagrams in one preallocated byte ring: no allocation per packet. A record that does
// not fit before the end of the ring starts again at offset 0 (the tail gap is wasted), so the
// ring is sized at the port buffer plus two of the largest datagrams.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

namespace rdmad::fabric {

// Trivial on purpose: the descriptor array is allocated uninitialised so that a large buffer only
// costs memory once it is used.
struct QueuedPacket {
  uint32_t offset;
  uint32_t len;
  int64_t arrival_ns;
  uint8_t tos;
};
static_assert(sizeof(QueuedPacket) == 24);

class PacketRing {
 public:
  PacketRing(size_t capacity_bytes, size_t max_packets);

  // Copies a datagram in; false when the ring has no room (bytes or descriptors).
  bool push(std::span<const uint8_t> data, uint8_t tos, int64_t arrival_ns);
  void pop();

  bool empty() const { return count_ == 0; }
  size_t packets() const { return count_; }
  uint64_t bytes() const { return bytes_; }  // sum of queued datagram lengths
  const QueuedPacket& front() const { return desc_[head_]; }
  std::span<const uint8_t> data(const QueuedPacket& p) const { return {buf_.get() + p.offset, p.len}; }

 private:
  // Where a record of `len` bytes would start, or SIZE_MAX if it does not fit.
  size_t place(size_t len) const;

  size_t capacity_bytes_;
  std::unique_ptr<uint8_t[]> buf_;
  size_t write_ = 0;  // next free byte
  size_t max_packets_;
  std::unique_ptr<QueuedPacket[]> desc_;
  size_t head_ = 0;
  size_t count_ = 0;
  uint64_t bytes_ = 0;
};

}  // namespace rdmad::fabric
