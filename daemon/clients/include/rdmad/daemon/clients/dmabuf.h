// Recognizing a dma-buf file descriptor without linking anything GPU-related.
#pragma once

#include <string>
#include <string_view>

#include "rdmad/daemon/clients/result.h"

namespace rdmad::clients {

// True for the /proc/<pid>/fd link text of a dma-buf: "anon_inode:dmabuf" (kernels < 5.18?) or
// "/dmabuf:<name>" (kernels that name dma-buf inodes).
bool is_dmabuf_link(std::string_view link);

// Checks that fd is a dma-buf by reading /proc/self/fd/<fd>; the error names what it is instead.
Result<Ok> check_dmabuf_fd(int fd);

}  // namespace rdmad::clients
