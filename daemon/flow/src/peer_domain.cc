#include "peer_domain.h"

#include <string>

#include "rdmad/daemon/clients/verbs_mapping.h"

namespace rdmad::flow {
namespace {

// The registration's local-access MRs in one domain.
struct LocalMrs final : clients::RegionAttachment {
  std::vector<std::unique_ptr<verbs::MemoryRegion>> mrs;
  std::array<uint32_t, proto::kMaxNics> lkeys{};
};

// Registers `length` bytes at `addr` (the daemon maps them) or at `dmabuf_offset` of `dmabuf_fd` in pd.
verbs::Result<std::unique_ptr<verbs::MemoryRegion>> register_in(verbs::ProtectionDomain& pd, void* addr, uint64_t iova,
                                                                uint64_t length,
                                                                int dmabuf_fd, uint64_t dmabuf_offset,
                                                                uint32_t access) {
  // Whatever the daemon maps (host memory, a dma-buf mapped for user-space NICs) is registered by
  // address; device memory it does not map, from its dma-buf.
  if (addr != nullptr) return pd.reg_mr(addr, length, access);
  return pd.reg_dmabuf_mr(dmabuf_fd, dmabuf_offset, length, iova, access);
}

}  // namespace

using clients::to_client_status;
using clients::to_verbs_access;

verbs::Result<std::unique_ptr<PeerDomain>> PeerDomain::open(uint64_t id, const std::vector<verbs::Device*>& devices,
                                                            SliceReader slices) {
  std::vector<std::unique_ptr<verbs::ProtectionDomain>> pds;
  for (verbs::Device* d : devices) {
    if (d == nullptr) {
      pds.emplace_back();
      continue;
    }
    auto pd = d->alloc_pd();
    if (!pd.ok())
      return verbs::Status(pd.status().code(), "nic " + d->info().name + ": protection domain: " + pd.status().message());
    pds.push_back(std::move(pd.value()));
  }
  return std::unique_ptr<PeerDomain>(new PeerDomain(id, std::move(pds), std::move(slices)));
}

verbs::Status PeerDomain::add_nic(size_t nic, verbs::Device& device) {
  if (nic >= pds_.size()) return verbs::Status::error("no NIC " + std::to_string(nic));
  auto pd = device.alloc_pd();
  if (!pd.ok())
    return verbs::Status(pd.status().code(), "nic " + device.info().name + ": protection domain: " + pd.status().message());
  pds_[nic] = std::move(pd.value());
  return verbs::Status::success();
}

clients::Result<ExactRegion> PeerDomain::register_exact(const clients::PinnedRange& range, uint32_t rdmad_access) const {
  ExactRegion out;
  const uint32_t access = to_verbs_access(rdmad_access);
  for (uint32_t i = 0; i < range.nic_count; ++i) {
    const uint32_t nic = range.keys[i].nic_index;
    if (nic >= pds_.size() || !pds_[nic]) continue;
    auto mr = register_in(*pds_[nic], range.addr, range.iova, range.length, range.dmabuf_fd,
                          range.dmabuf_offset, access);
    if (!mr.ok())
      return clients::Error{to_client_status(mr.status().code()),
                        "registering the range on nic " + std::to_string(nic) + ": " + mr.status().message()};
    out.keys.push_back({nic, mr.value()->lkey(), mr.value()->rkey()});
    peer::GrantKey g{static_cast<uint16_t>(nic), mr.value()->rkey()};
    if (auto sl = slices_ ? slices_(*mr.value()) : std::nullopt; sl && sl->rkeys.size() > 1) {
      // Slice 0's rkey() reaches its first slice only: the peer gets every slice's.
      if (sl->rkeys.size() > peer::kMaxKeySlices)
        return clients::Error{RDMAD_ERR_NO_RESOURCE, "nic " + std::to_string(nic) + " holds the range as " +
                                                     std::to_string(sl->rkeys.size()) + " MRs, more than a grant carries"};
      g.rkey = sl->rkeys[0];
      g.slice_bytes = sl->slice_bytes;
      g.slice_rkeys.assign(sl->rkeys.begin() + 1, sl->rkeys.end());
    }
    out.grant_keys.push_back(std::move(g));
    out.mrs.push_back(std::move(mr.value()));
  }
  if (out.mrs.empty()) return clients::Error{RDMAD_ERR_INVALID_ARGUMENT, "the registration is on no NIC of the flows"};
  return out;
}

clients::Result<std::array<uint32_t, proto::kMaxNics>> PeerDomain::local_keys(clients::RegionPins& registrations,
                                                                          const clients::PinnedRange& range) const {
  auto made = registrations.attachment(range.pin, id_, [this](const clients::RegionView& r)
                                                           -> clients::Result<std::unique_ptr<clients::RegionAttachment>> {
    auto mrs = std::make_unique<LocalMrs>();
    const uint32_t access = to_verbs_access(r.access & RDMAD_ACCESS_LOCAL_WRITE);
    for (uint32_t nic : r.nics) {
      if (nic >= pds_.size() || !pds_[nic] || nic >= mrs->lkeys.size()) continue;
      auto mr = register_in(*pds_[nic], r.addr, r.iova, r.length, r.dmabuf_fd, r.dmabuf_offset, access);
      if (!mr.ok())
        return clients::Error{to_client_status(mr.status().code()), "registering for a flow on nic " + std::to_string(nic) +
                                                             ": " + mr.status().message()};
      mrs->lkeys[nic] = mr.value()->lkey();
      mrs->mrs.push_back(std::move(mr.value()));
    }
    return std::unique_ptr<clients::RegionAttachment>(std::move(mrs));
  });
  if (!made.ok()) return made.error();
  return static_cast<const LocalMrs*>(made.value())->lkeys;
}

}  // namespace rdmad::flow
