// One peer's protection domains, one per local NIC. Only that peer's QPs live in them, and only
// what this node gave that peer is registered with remote access in them: an MR over exactly each
// range exported to it and over exactly each receive buffer advertised to it. The registrations a
// flow to it reads from or writes into get a local-access MR here too (made on first use and kept
// with the registration). So a key a peer learns — its own grants, guessed ones, another peer's —
// reaches nothing else: the NIC checks every remote access against the QP's protection domain.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include "rdmad/daemon/flow/mr_slices.h"
#include "rdmad/daemon/clients/region_pins.h"
#include "rdmad/daemon/peer/wire.h"
#include "rdmad/protocol.h"
#include "rdmad/verbs/device.h"

namespace rdmad::flow {

/// MRs over exactly one range with exactly some access, one per NIC the registration is on.
struct ExactRegion {
  std::vector<std::unique_ptr<verbs::MemoryRegion>> mrs;
  std::vector<clients::NicKeys> keys;  // nic_index, lkey, rkey
  // What a peer needs to reach it, per NIC: the rkey, or every slice's where the NIC holds the
  // range as several MRs (grants and receive posts carry these).
  std::vector<peer::GrantKey> grant_keys;
};

class PeerDomain {
 public:
  /// Allocates a protection domain on each device (none where the device is nullptr: a NIC out of
  /// service); `id` is unique for the daemon's lifetime (the registration table files its
  /// local-access MRs under it).
  /// `slices` reads the slices of an MR a backend split (none: every MR is one).
  static verbs::Result<std::unique_ptr<PeerDomain>> open(uint64_t id, const std::vector<verbs::Device*>& devices,
                                                         SliceReader slices = {});

  uint64_t id() const { return id_; }
  size_t nic_count() const { return pds_.size(); }
  verbs::ProtectionDomain* pd(size_t nic) const { return nic < pds_.size() ? pds_[nic].get() : nullptr; }
  /// A NIC came into service: its protection domain for this peer.
  verbs::Status add_nic(size_t nic, verbs::Device& device);

  /// Registers [range.iova, range.iova + range.length) of a pinned registration on every NIC it is
  /// on, with `rdmad_access` (RDMAD_ACCESS_*): an export or a posted receive.
  clients::Result<ExactRegion> register_exact(const clients::PinnedRange& range, uint32_t rdmad_access) const;

  /// The lkeys, by NIC index, of the registration behind `range` in this domain (0 where it is not
  /// registered); the MRs are made on first use and kept by the registration table until the
  /// registration or this domain goes.
  clients::Result<std::array<uint32_t, proto::kMaxNics>> local_keys(clients::RegionPins& registrations,
                                                                const clients::PinnedRange& range) const;

 private:
  PeerDomain(uint64_t id, std::vector<std::unique_ptr<verbs::ProtectionDomain>> pds, SliceReader slices)
      : id_(id), pds_(std::move(pds)), slices_(std::move(slices)) {}

  uint64_t id_;
  std::vector<std::unique_ptr<verbs::ProtectionDomain>> pds_;
  SliceReader slices_;
};

}  // namespace rdmad::flow
