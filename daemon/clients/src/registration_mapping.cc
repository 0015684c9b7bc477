// Mapping a registered range: the memfd or dma-buf validated and mapped, its resident pages
// populated for user-space NICs, the region registered on every NIC the request selects.
#include "rdmad/daemon/clients/registration_service.h"

#include "rdmad/daemon/clients/nic_topology.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <vector>

#include "log.h"
#include "rdmad/base/log_fields.h"
#include "rdmad/base/log_limiter.h"
#include "rdmad/daemon/clients/dmabuf.h"
#include "rdmad/daemon/clients/request_decoder.h"

namespace rdmad::clients {
namespace {

// Maps the pages of [base, base+bytes) that the file already holds (mincore), so a backend that
// moves data through this mapping (soft NICs) takes no page faults for them on its datapath
// thread: the first transfer of a fresh 1 GiB buffer took ~262k minor faults there, stalling every
// flow on that NIC. Holes stay unmapped: populating them would allocate the client's memory and
// charge it to the daemon's memory cgroup. Best effort: without MADV_POPULATE_* (Linux < 5.14)
// the pages are faulted in on first use as before.
//
// Only for ranges of kMapResidentMinBytes and more: a mapped page also makes munmap at
// deregistration flush other CPUs' TLBs, and for a 4 KiB range that doubled the service's CPU per
// register + deregister pair (22 -> 50 µs, BENCHMARKS.md) to save the datapath one fault.
constexpr uint64_t kMapResidentMinBytes = 1 << 20;

void map_resident_pages(void* base, uint64_t bytes, bool writable) {
  const auto page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  const uint64_t pages = (bytes + page - 1) / page;
  std::vector<unsigned char> resident(pages);
  if (mincore(base, bytes, resident.data()) != 0) return;
  const int advice = writable ? MADV_POPULATE_WRITE : MADV_POPULATE_READ;
  auto* p = static_cast<std::byte*>(base);
  for (uint64_t i = 0; i < pages;) {
    if ((resident[i] & 1) == 0) {
      ++i;
      continue;
    }
    uint64_t j = i;
    while (j < pages && (resident[j] & 1) != 0) ++j;
    if (madvise(p + i * page, (j - i) * page, advice) != 0 && errno == EINVAL) return;  // not supported
    i = j;
  }
}

// A client registration carries local access only: what a peer may reach is decided per export
// and per posted receive, by MRs over exactly that range in that peer's own protection domain
// (daemon/flow). An rkey of a registration is refused by every NIC, whoever learns it.
uint32_t local_access_for(uint32_t access) {
  constexpr uint32_t kWrites = RDMAD_ACCESS_LOCAL_WRITE | RDMAD_ACCESS_REMOTE_WRITE | RDMAD_ACCESS_REMOTE_ATOMIC;
  return (access & kWrites) != 0 ? RDMAD_ACCESS_LOCAL_WRITE : 0;
}

}  // namespace

Result<std::unique_ptr<RegistrationService::Region>> RegistrationService::make_region(int fd, const Request& req,
                                                                                      RegionKey key,
                                                                                      uint64_t aligned,
                                                                                      uint64_t pinned) {
  auto region = std::make_unique<Region>();
  region->key = key;
  region->kind = req.kind;
  region->pinned_bytes = pinned;
  region->length = req.length;
  region->file_offset = req.offset;
  region->access = req.access;
  const uint32_t mr_access = local_access_for(req.access);
  Result<MemoryRegion> mr = Error{};
  if (req.kind == RDMAD_MEM_HOST) {
    int prot = PROT_READ;
    if ((req.access & (RDMAD_ACCESS_LOCAL_WRITE | RDMAD_ACCESS_REMOTE_WRITE | RDMAD_ACCESS_REMOTE_ATOMIC)) !=
        0)
      prot |= PROT_WRITE;
    void* base = mmap(nullptr, pinned, prot, MAP_SHARED, fd, static_cast<off_t>(aligned));
    if (base == MAP_FAILED) return sys_error("mmap of the memfd range", errno);
    if (!registrar_.faults_in_pages() && pinned >= kMapResidentMinBytes)
      map_resident_pages(base, pinned, (prot & PROT_WRITE) != 0);
    region->map_base = base;
    region->map_bytes = pinned;
    auto* addr = static_cast<std::byte*>(base) + (req.offset - aligned);
    region->iova = reinterpret_cast<uintptr_t>(addr);
    mr = registrar_.register_host(addr, req.length, mr_access, req.nic_mask);
  } else {
    region->iova = req.iova;
    if (registrar_.maps_dmabuf()) {
      // A user-space NIC reaches memory only through our address space: map the dma-buf and
      // register the mapping, which its keys then answer to (the exporter must allow mmap).
      const int prot = (mr_access & RDMAD_ACCESS_LOCAL_WRITE) != 0 ? PROT_READ | PROT_WRITE : PROT_READ;
      void* base = mmap(nullptr, pinned, prot, MAP_SHARED, fd, static_cast<off_t>(aligned));
      if (base == MAP_FAILED)
        return Error{RDMAD_ERR_NOT_SUPPORTED, std::string("the dma-buf cannot be mapped (") + std::strerror(errno) +
                                                  "): a soft NIC reaches device memory only through a mapping, "
                                                  "which its exporter does not allow; use the rdma_core backend"};
      region->map_base = base;
      region->map_bytes = pinned;
      auto* addr = static_cast<std::byte*>(base) + (req.offset - aligned);
      region->iova = reinterpret_cast<uintptr_t>(addr);
    }
    // Kept so that exports and flows can register exactly their range again in a peer's domain.
    if (fds_ != nullptr && !fds_->take(1))
      return Error{RDMAD_ERR_NO_RESOURCE, "the daemon is out of file descriptors for GPU registrations"};
    region->dmabuf_fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (region->dmabuf_fd < 0) {
      if (fds_ != nullptr) fds_->give(1);
      return sys_error("dup of the dma-buf fd", errno);
    }
    mr = region->map_base != nullptr
             ? registrar_.register_host(reinterpret_cast<void*>(static_cast<uintptr_t>(region->iova)), req.length,
                                        mr_access, req.nic_mask)
             : registrar_.register_dmabuf(fd, req.offset, req.length, req.iova, mr_access, req.nic_mask);
  }
  if (!mr.ok()) {
    if (region->map_base != nullptr) munmap(region->map_base, region->map_bytes);
    if (region->dmabuf_fd >= 0) {
      ::close(region->dmabuf_fd);
      if (fds_ != nullptr) fds_->give(1);
    }
    return mr.error();
  }
  region->mr_id = mr.value().mr_id;
  // After registering: a hardware registration has faulted the pages in.
  if (region->map_base != nullptr && registrar_.faults_in_pages())
    region->numa_node = page_numa_node(reinterpret_cast<void*>(region->iova));
  for (Locality l : nic_localities(locality_nics_, req.kind, region->numa_node, req.gpu_pci_address,
                                   config_.diagnose_root))
    region->locality.push_back(static_cast<uint8_t>(l));
  region->keys = std::move(mr.value().keys);
  return region;
}

int32_t page_numa_node(const void* addr) {
  void* page = const_cast<void*>(addr);
  int status = -1;
  // move_pages without target nodes only reports where each page is.
  if (syscall(SYS_move_pages, 0, 1UL, &page, nullptr, &status, 0) != 0 || status < 0) return -1;
  return status;
}


}  // namespace rdmad::clients
