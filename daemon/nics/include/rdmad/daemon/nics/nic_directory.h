#pragma once
// The node's NICs as the client service sees them: a list in [[nic]] order, each with what a
// client may choose by (name, backend, PCI address, link, speed, NUMA node). daemon::NodeNics
// implements it; the tests' double is in tests/support/doubles/.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "rdmad/rdmad.h"

namespace rdmad::clients {

struct NicDescriptor {
  std::string name;
  std::string backend;
  std::string pci_address;  // "0000:17:00.0", empty for software NICs
  rdmad_link_state link_state = RDMAD_LINK_UNKNOWN;
  uint32_t speed_mbps = 0;
  int32_t numa_node = -1;
};

class NicDirectory {
 public:
  virtual ~NicDirectory() = default;
  // The node's NICs; a NIC's position is its index in the protocol (and its nic_mask bit).
  virtual std::vector<NicDescriptor> nics() const = 0;
  // Number of NICs (called per registration: implementations make it cheap).
  virtual size_t count() const { return nics().size(); }
};

}  // namespace rdmad::clients
