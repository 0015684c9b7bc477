#pragma once

#include <array>
#include <cstring>
#include <span>
#include <string_view>

#include "rdmad/protocol.h"

namespace rdmad::clients {

using FrameBuffer = std::array<std::byte, proto::kMaxFrameBytes>;

// Appends a header and body parts into a fixed frame buffer; finish() patches the length.
class FrameWriter {
 public:
  FrameWriter(FrameBuffer& buf, uint16_t version, uint16_t type, uint64_t request_id) : buf_(buf) {
    auto h = proto::make_header(version, type, 0, request_id);
    append(h);
  }
  template <class T>
  void append(const T& value) {
    append_bytes(&value, sizeof(T));
  }
  void append_bytes(const void* data, size_t n) {
    if (n > buf_.size() - size_) n = buf_.size() - size_;  // callers size bodies to fit
    std::memcpy(buf_.data() + size_, data, n);
    size_ += n;
  }
  std::span<const std::byte> finish() {
    auto length = static_cast<uint32_t>(size_ - sizeof(proto::Header));
    std::memcpy(buf_.data() + offsetof(proto::Header, length), &length, sizeof(length));
    return {buf_.data(), size_};
  }

 private:
  FrameBuffer& buf_;
  size_t size_ = 0;
};

// An error reply to request `request_id`.
inline std::span<const std::byte> write_error(FrameBuffer& buf, uint16_t version, uint64_t request_id,
                                              rdmad_status status, std::string_view message) {
  FrameWriter w(buf, version, static_cast<uint16_t>(proto::MsgType::kError), request_id);
  proto::ErrorReply e{};
  e.status = status;
  size_t n = std::min(message.size(), sizeof(e.message) - 1);
  std::memcpy(e.message, message.data(), n);
  w.append(e);
  return w.finish();
}

}  // namespace rdmad::clients
