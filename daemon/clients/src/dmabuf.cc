#include "rdmad/daemon/clients/dmabuf.h"

#include <unistd.h>

#include <cerrno>
#include <string>

namespace rdmad::clients {

bool is_dmabuf_link(std::string_view link) {
  return link == "anon_inode:dmabuf" || link.starts_with("/dmabuf:") || link.starts_with("anon_inode:dmabuf");
}

Result<Ok> check_dmabuf_fd(int fd) {
  std::string path = "/proc/self/fd/" + std::to_string(fd);
  char buf[256];
  ssize_t n = readlink(path.c_str(), buf, sizeof(buf) - 1);
  if (n < 0) return sys_error("readlink " + path, errno);
  std::string_view link(buf, static_cast<size_t>(n));
  if (!is_dmabuf_link(link))
    return Error{RDMAD_ERR_INVALID_ARGUMENT, "fd is not a dma-buf (it is " + std::string(link) + ")"};
  return Ok{};
}

}  // namespace rdmad::clients
