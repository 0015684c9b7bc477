// libFuzzer target for the request decoder. Input: one control byte (bits 0-2: fds received,
// bit 3: control data truncated, bit 4: hello already done, bit 5: at the newest version rather
// than version 1) followed by the frame bytes. Checks
// the decoder's promises: it never reads outside the frame, and what it dispatches is exactly
// the well-formed request it claims.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>

#include "rdmad/daemon/clients/request_decoder.h"

namespace {

void check(bool ok) {
  if (!ok) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using rdmad::clients::DecodeAction;
  if (size == 0) return 0;
  const uint8_t control = data[0];
  const size_t fds = control & 7;
  const bool truncated = (control & 8) != 0;
  const uint16_t version = (control & 16) == 0 ? 0 : (control & 32) != 0 ? rdmad::proto::kVersionMax : 1;
  std::span<const std::byte> frame(reinterpret_cast<const std::byte*>(data + 1), size - 1);
  auto d = rdmad::clients::decode_request(frame, fds, truncated, version);
  if (d.action == DecodeAction::kClose) return 0;
  check(frame.size() == sizeof(rdmad::proto::Header) + d.header.length);
  check(d.header.magic == rdmad::proto::kMagic);
  if (d.action == DecodeAction::kReplyError) {
    check(d.status != RDMAD_OK && d.reason != nullptr && d.reason[0] != '\0');
    return 0;
  }
  check(d.status == RDMAD_OK);
  check(!truncated);
  check(fds == rdmad::proto::request_fd_count(d.header.type));
  check(rdmad::proto::request_body_valid(d.header.type, d.header.length, version != 0 ? version : rdmad::proto::kVersionMin));
  if (const auto* r = std::get_if<rdmad::proto::RegisterHostRequest>(&d.body)) {
    check(r->length > 0 && r->offset + r->length >= r->offset && rdmad::clients::valid_access(r->access));
  }
  if (const auto* r = std::get_if<rdmad::proto::RegisterDmabufRequest>(&d.body)) {
    check(r->length > 0 && r->iova + r->length >= r->iova && rdmad::clients::valid_access(r->access));
  }
  if (const auto* h = std::get_if<rdmad::proto::HelloRequest>(&d.body))
    check(version == 0 && h->min_version <= h->max_version);
  return 0;
}
