// The CUDA driver API, loaded at run time (dlopen("libcuda.so.1") + cuGetProcAddress) so that
// librdmad works, and says why GPU registration is unavailable, on machines without CUDA.
#pragma once

#include <cstdint>
#include <string>

#include "rdmad/rdmad.h"

namespace rdmad::client {

struct DmabufExport {
  int fd = -1;          // dma-buf of the page-aligned range around the buffer
  uint64_t offset = 0;  // buffer start - aligned start
};

// Checks the pointer and the device (dma-buf support), page-aligns the range and exports it.
rdmad_status export_dmabuf(uint64_t device_ptr, uint64_t length, DmabufExport* out, std::string* error);

// PCI address ("0000:17:00.0", lower case) of the GPU holding device_ptr.
rdmad_status gpu_pci_address(uint64_t device_ptr, std::string* pci, std::string* error);

}  // namespace rdmad::client
