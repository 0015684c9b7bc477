#pragma once
// Big-endian writer and bounds-checked reader shared by the wire codecs. Both also offer field(x)
// for every field type, so that one layout function, `[](auto& codec, auto& msg) { codec.field(
// msg.a); ... }`, describes a message for encoding (Writer, const msg) and decoding (Reader) alike:
// the two directions cannot drift apart (encode_with / decode_with).
#include <array>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

namespace rdmad::peer::codec {

class Writer {
 public:
  void u8(uint8_t v) { out_.push_back(v); }
  void u16(uint16_t v) {
    u8(static_cast<uint8_t>(v >> 8));
    u8(static_cast<uint8_t>(v));
  }
  void u32(uint32_t v) {
    u16(static_cast<uint16_t>(v >> 16));
    u16(static_cast<uint16_t>(v));
  }
  void u64(uint64_t v) {
    u32(static_cast<uint32_t>(v >> 32));
    u32(static_cast<uint32_t>(v));
  }
  void bytes(std::span<const uint8_t> b) { out_.insert(out_.end(), b.begin(), b.end()); }
  void str8(const std::string& s) {
    u8(static_cast<uint8_t>(s.size()));
    bytes({reinterpret_cast<const uint8_t*>(s.data()), s.size()});
  }
  std::vector<uint8_t> take() { return std::move(out_); }

  void field(uint8_t v) { u8(v); }
  void field(uint16_t v) { u16(v); }
  void field(uint32_t v) { u32(v); }
  void field(int32_t v) { u32(static_cast<uint32_t>(v)); }
  void field(uint64_t v) { u64(v); }
  void field(const std::string& s) { str8(s); }
  template <size_t N>
  void field(const std::array<uint8_t, N>& a) {
    bytes(a);
  }
  // A one-byte enum (its range is the decoder's to check).
  template <class E>
    requires std::is_enum_v<E> && (sizeof(E) == 1)
  void field(E e) {
    u8(static_cast<uint8_t>(e));
  }

 private:
  std::vector<uint8_t> out_;
};

// Bounds-checked reader: any read past the end marks it failed and returns zeros.
class Reader {
 public:
  explicit Reader(std::span<const uint8_t> in) : in_(in) {}
  uint8_t u8() { return ok(1) ? in_[pos_++] : 0; }
  uint16_t u16() {
    const uint16_t hi = u8();
    return static_cast<uint16_t>(hi << 8 | u8());
  }
  uint32_t u32() {
    const uint32_t hi = u16();
    return hi << 16 | u16();
  }
  uint64_t u64() {
    const uint64_t hi = u32();
    return hi << 32 | u32();
  }
  bool bytes(std::span<uint8_t> out) {
    if (!ok(out.size())) return false;
    std::memcpy(out.data(), in_.data() + pos_, out.size());
    pos_ += out.size();
    return true;
  }
  std::string str8() {
    const size_t n = u8();
    if (!ok(n)) return {};
    std::string s(reinterpret_cast<const char*>(in_.data() + pos_), n);
    pos_ += n;
    return s;
  }
  bool failed() const { return failed_; }
  bool done() const { return !failed_ && pos_ == in_.size(); }
  void fail() { failed_ = true; }  // a field read fine but is not valid: the message is rejected

  void field(uint8_t& v) { v = u8(); }
  void field(uint16_t& v) { v = u16(); }
  void field(uint32_t& v) { v = u32(); }
  void field(int32_t& v) { v = static_cast<int32_t>(u32()); }
  void field(uint64_t& v) { v = u64(); }
  void field(std::string& s) { s = str8(); }
  template <size_t N>
  void field(std::array<uint8_t, N>& a) {
    bytes(a);
  }
  // A one-byte enum: any byte is read; the message's decoder checks the range.
  template <class E>
    requires std::is_enum_v<E> && (sizeof(E) == 1)
  void field(E& e) {
    e = static_cast<E>(u8());
  }

 private:
  bool ok(size_t n) {
    if (failed_ || in_.size() - pos_ < n) failed_ = true;
    return !failed_;
  }
  std::span<const uint8_t> in_;
  size_t pos_ = 0;
  bool failed_ = false;
};

/// The bytes of `m` laid out by `layout(writer, m)`.
template <class M, class Layout>
std::vector<uint8_t> encode_with(const M& m, Layout layout) {
  Writer w;
  layout(w, m);
  return w.take();
}

/// `payload` read by `layout(reader, m)`; nullopt when it is short, has bytes left over or a
/// field was rejected (Reader::fail).
template <class M, class Layout>
std::optional<M> decode_with(std::span<const uint8_t> payload, Layout layout) {
  Reader r(payload);
  M m;
  layout(r, m);
  if (!r.done()) return std::nullopt;
  return m;
}

}  // namespace rdmad::peer::codec
