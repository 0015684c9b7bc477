#include "packet_ring.h"

#include <algorithm>
#include <cstring>

namespace rdmad::fabric {

PacketRing::PacketRing(size_t capacity_bytes, size_t max_packets)
    : capacity_bytes_(capacity_bytes),
      buf_(std::make_unique_for_overwrite<uint8_t[]>(capacity_bytes)),
      max_packets_(std::max<size_t>(max_packets, 1)),
      desc_(std::make_unique_for_overwrite<QueuedPacket[]>(max_packets_)) {}

size_t PacketRing::place(size_t len) const {
  if (count_ == 0) return len <= capacity_bytes_ ? 0 : SIZE_MAX;
  const size_t read = front().offset;
  if (write_ > read) {  // in use: [read, write_)
    if (write_ + len <= capacity_bytes_) return write_;
    return len < read ? 0 : SIZE_MAX;
  }
  // Wrapped, in use: [read, end) and [0, write_). Strictly below read so full never looks empty.
  return write_ + len < read ? write_ : SIZE_MAX;
}

bool PacketRing::push(std::span<const uint8_t> data, uint8_t tos, int64_t arrival_ns) {
  if (count_ == max_packets_) return false;
  const size_t len = std::max<size_t>(data.size(), 1);  // a zero-length datagram still takes a byte
  const size_t at = place(len);
  if (at == SIZE_MAX) return false;
  if (!data.empty()) std::memcpy(buf_.get() + at, data.data(), data.size());
  write_ = at + len;
  desc_[(head_ + count_) % max_packets_] =
      QueuedPacket{static_cast<uint32_t>(at), static_cast<uint32_t>(data.size()), arrival_ns, tos};
  ++count_;
  bytes_ += data.size();
  return true;
}

void PacketRing::pop() {
  bytes_ -= desc_[head_].len;
  head_ = (head_ + 1) % max_packets_;
  if (--count_ == 0) {
    head_ = 0;
    write_ = 0;
  }
}

}  // namespace rdmad::fabric
