// Host memory helpers of the C API: sealed memfd buffers and buffer locations.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "cuda_loader.h"
#include "rdmad/protocol.h"
#include "rdmad/rdmad.h"

extern "C" {

rdmad_status rdmad_alloc_host(size_t length, rdmad_host_buffer* out) {
  if (out == nullptr || length == 0) return RDMAD_ERR_INVALID_ARGUMENT;
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  if (length > SIZE_MAX - page) return RDMAD_ERR_INVALID_ARGUMENT;
  size_t bytes = (length + page - 1) & ~(page - 1);
  int fd = memfd_create("rdmad-host", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return RDMAD_ERR_SYSTEM;
  // The daemon keeps the pages mapped after registering: a file that could shrink would fault it.
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0 || fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK) != 0) {
    close(fd);
    return errno == ENOMEM || errno == ENOSPC ? RDMAD_ERR_NO_RESOURCE : RDMAD_ERR_SYSTEM;
  }
  // MAP_POPULATE: the pages are allocated now, by (and charged to) the caller, as pinned-memory
  // allocators do; the daemon then maps them at registration instead of faulting them in on its
  // datapath at the first transfer, and never allocates the caller's memory itself.
  void* addr = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  if (addr == MAP_FAILED) {
    close(fd);
    return RDMAD_ERR_NO_RESOURCE;
  }
  *out = rdmad_host_buffer{addr, bytes, fd};
  return RDMAD_OK;
}

void rdmad_free_host(rdmad_host_buffer* buffer) {
  if (buffer == nullptr || buffer->addr == nullptr) return;
  munmap(buffer->addr, buffer->length);
  close(buffer->fd);
  *buffer = rdmad_host_buffer{nullptr, 0, -1};
}

rdmad_status rdmad_locate_host(const void* addr, rdmad_location* where) {
  if (where == nullptr) return RDMAD_ERR_INVALID_ARGUMENT;
  std::memset(where, 0, sizeof(*where));
  where->kind = RDMAD_MEM_HOST;
  where->numa_node = -1;
  int node = -1;
  constexpr unsigned long kMpolFNode = 1, kMpolFAddr = 2;  // <numaif.h> without linking libnuma
  if (syscall(SYS_get_mempolicy, &node, nullptr, 0UL, addr, kMpolFNode | kMpolFAddr) == 0)
    where->numa_node = node;
  return RDMAD_OK;
}

rdmad_status rdmad_locate_gpu(uint64_t device_ptr, rdmad_location* where) {
  if (where == nullptr) return RDMAD_ERR_INVALID_ARGUMENT;
  std::memset(where, 0, sizeof(*where));
  where->kind = RDMAD_MEM_GPU;
  where->numa_node = -1;
  std::string pci, error;
  rdmad_status s = rdmad::client::gpu_pci_address(device_ptr, &pci, &error);
  if (s != RDMAD_OK) return s;
  rdmad::proto::copy_cstr(where->pci_address, pci.c_str());
  return RDMAD_OK;
}

}  // extern "C"
