// Keys of remote ranges: one rkey per NIC, or one per slice where the peer's NIC holds the range as
// several MRs, and the rkey each part of an access uses.
#include <algorithm>

#include "flow_engine.h"

namespace rdmad::flow {

void set_remote_keys(RemoteRange& range, std::span<const peer::GrantKey> keys) {
  std::shared_ptr<std::vector<RemoteSlices>> sliced;
  for (const peer::GrantKey& k : keys) {
    if (k.nic_index >= range.rkeys.size()) continue;
    range.rkeys[k.nic_index] = k.rkey;
    range.has_key[k.nic_index] = true;
    if (k.slice_rkeys.empty()) continue;
    if (!sliced) sliced = std::make_shared<std::vector<RemoteSlices>>(range.rkeys.size());
    RemoteSlices& s = (*sliced)[k.nic_index];
    s.slice_bytes = k.slice_bytes;
    s.rkeys.push_back(k.rkey);
    s.rkeys.insert(s.rkeys.end(), k.slice_rkeys.begin(), k.slice_rkeys.end());
  }
  range.slices = std::move(sliced);
}

size_t remote_pieces(const RemoteRange& range, uint16_t nic, uint64_t offset, uint32_t length,
                     std::span<RemotePiece, kMaxRemotePieces> out) {
  if (nic >= range.has_key.size() || !range.has_key[nic]) return 0;
  if (offset > range.length || length > range.length - offset) return 0;
  const RemoteSlices* s = range.slices && nic < range.slices->size() ? &(*range.slices)[nic] : nullptr;
  if (s == nullptr || s->rkeys.empty() || s->slice_bytes == 0) {
    out[0] = {offset, length, range.rkeys[nic]};
    return 1;
  }
  size_t n = 0;
  uint64_t at = offset;
  uint64_t left = length;
  do {
    const uint64_t slice = at / s->slice_bytes;
    if (slice >= s->rkeys.size() || n == out.size()) return 0;
    const uint64_t room = (slice + 1) * s->slice_bytes - at;
    const auto take = static_cast<uint32_t>(std::min(left, room));
    out[n++] = {at, take, s->rkeys[slice]};
    at += take;
    left -= take;
  } while (left > 0);
  return n;
}

}  // namespace rdmad::flow
