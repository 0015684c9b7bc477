#include "vgem.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <climits>
#include <cstdio>
#include <cstring>
#include <string>

namespace rdmad::fake_cuda {
namespace {

// include/uapi/drm/drm_mode.h and drm.h.
struct DrmModeCreateDumb {
  uint32_t height, width, bpp, flags;
  uint32_t handle, pitch;  // out
  uint64_t size;           // out
};
struct DrmModeMapDumb {
  uint32_t handle, pad;
  uint64_t offset;  // out: the fake offset to mmap on the card
};
struct DrmModeDestroyDumb {
  uint32_t handle;
};
struct DrmPrimeHandle {
  uint32_t handle;
  uint32_t flags;  // DRM_CLOEXEC | DRM_RDWR
  int32_t fd;      // out
};
constexpr unsigned long kDrmIoctlBase = 'd';
constexpr unsigned long kCreateDumb = _IOWR(kDrmIoctlBase, 0xB2, DrmModeCreateDumb);
constexpr unsigned long kMapDumb = _IOWR(kDrmIoctlBase, 0xB3, DrmModeMapDumb);
constexpr unsigned long kDestroyDumb = _IOWR(kDrmIoctlBase, 0xB4, DrmModeDestroyDumb);
constexpr unsigned long kPrimeHandleToFd = _IOWR(kDrmIoctlBase, 0x2d, DrmPrimeHandle);

// /dev/dri/cardN of the vgem device (/sys/class/drm/cardN -> ../../devices/platform/vgem/drm/cardN).
int open_vgem() {
  DIR* d = opendir("/sys/class/drm");
  if (d == nullptr) return -1;
  int fd = -1;
  while (dirent* e = readdir(d)) {
    if (std::strncmp(e->d_name, "card", 4) != 0 || std::strchr(e->d_name, '-') != nullptr) continue;
    char link[PATH_MAX] = {};
    const std::string path = std::string("/sys/class/drm/") + e->d_name;
    const ssize_t n = readlink(path.c_str(), link, sizeof link - 1);
    if (n <= 0 || std::strstr(link, "/vgem/") == nullptr) continue;
    fd = open((std::string("/dev/dri/") + e->d_name).c_str(), O_RDWR | O_CLOEXEC);
    if (fd >= 0) break;
  }
  closedir(d);
  return fd;
}

}  // namespace

int vgem_card() {
  static const int fd = open_vgem();
  return fd;
}

bool vgem_alloc(size_t size, VgemBuffer* out) {
  const int card = vgem_card();
  if (card < 0 || size == 0 || size % 4096 != 0) return false;
  DrmModeCreateDumb c{};
  c.width = 1024;  // 32 bpp: one 4096-byte row per 1024 pixels
  c.bpp = 32;
  c.height = static_cast<uint32_t>(size / 4096);
  if (ioctl(card, kCreateDumb, &c) != 0) return false;
  DrmModeMapDumb m{};
  m.handle = c.handle;
  void* p = MAP_FAILED;
  if (ioctl(card, kMapDumb, &m) == 0)
    p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, card, static_cast<off_t>(m.offset));
  if (p == MAP_FAILED) {
    DrmModeDestroyDumb d{c.handle};
    ioctl(card, kDestroyDumb, &d);
    return false;
  }
  *out = {c.handle, p, size};
  return true;
}

void vgem_free(VgemBuffer& b) {
  if (b.addr != nullptr) munmap(b.addr, b.size);
  DrmModeDestroyDumb d{b.handle};
  ioctl(vgem_card(), kDestroyDumb, &d);
  b = {};
}

int vgem_export(const VgemBuffer& b) {
  DrmPrimeHandle h{};
  h.handle = b.handle;
  h.flags = O_CLOEXEC | O_RDWR;
  h.fd = -1;
  if (ioctl(vgem_card(), kPrimeHandleToFd, &h) != 0) return -1;
  return h.fd;
}

}  // namespace rdmad::fake_cuda
