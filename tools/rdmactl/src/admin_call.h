// Admin requests as rdmactl's commands make them: request bodies as bytes, reply fields read at an
// offset, and paged lists fetched whole.
#pragma once

#include <cstdio>
#include <cstring>
#include <span>
#include <vector>

#include "output.h"
#include "rdmad/admin.h"

namespace rdmactl {

template <class T>
std::span<const std::byte> bytes_of(const T& v) {
  return {reinterpret_cast<const std::byte*>(&v), sizeof(T)};
}

template <class T>
T load(const std::vector<std::byte>& buf, size_t offset) {
  T v{};
  if (offset + sizeof(T) <= buf.size()) std::memcpy(&v, buf.data() + offset, sizeof(T));
  return v;
}

// Every entry of a paged list (a ListRequest answered by a ListReply and entries); `next(entries)`
// is the after_handle of the next page. False after printing the error ("rdmactl: <what>: ...").
template <class Entry, class Next>
bool list_all(rdmad_client* c, rdmad::proto::MsgType type, uint32_t page, const char* what, Next next,
              std::vector<Entry>* out, int* rc) {
  rdmad::proto::ListRequest req{0, page, 0};
  std::vector<std::byte> reply;
  for (;;) {
    if (auto st = rdmad::admin::call(c, type, bytes_of(req), &reply); st != RDMAD_OK) {
      *rc = fail(c, what, st);
      return false;
    }
    const auto head = load<rdmad::proto::ListReply>(reply, 0);
    if (reply.size() != sizeof(head) + size_t{head.count} * sizeof(Entry)) {
      std::fprintf(stderr, "rdmactl: malformed reply from the daemon\n");
      *rc = kExitDaemonError;
      return false;
    }
    for (uint32_t i = 0; i < head.count; ++i) out->push_back(load<Entry>(reply, sizeof(head) + i * sizeof(Entry)));
    if (!head.more || head.count == 0) return true;
    req.after_handle = next(*out);
  }
}

}  // namespace rdmactl
