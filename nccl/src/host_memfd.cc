#include "host_memfd.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace rdmad::nccl {
namespace {

struct Mapping {
  uintptr_t begin = 0, end = 0;
  uint64_t offset = 0;
  dev_t dev = 0;
  ino_t inode = 0;
  bool shared_writable = false;
  bool memfd = false;
};

// The mapping of /proc/self/maps that holds `addr`.
std::optional<Mapping> mapping_of(uintptr_t addr) {
  FILE* maps = std::fopen("/proc/self/maps", "re");
  if (maps == nullptr) return std::nullopt;
  std::optional<Mapping> found;
  char line[4096 + 256];
  while (std::fgets(line, sizeof line, maps) != nullptr) {
    unsigned long begin = 0, end = 0, offset = 0, inode = 0;
    unsigned major = 0, minor = 0;
    char perms[5] = {};
    int path_at = 0;
    if (std::sscanf(line, "%lx-%lx %4s %lx %x:%x %lu %n", &begin, &end, perms, &offset, &major, &minor,
                    &inode, &path_at) < 7)
      continue;
    if (addr < begin || addr >= end) continue;
    Mapping m;
    m.begin = begin;
    m.end = end;
    m.offset = offset;
    m.dev = makedev(major, minor);
    m.inode = static_cast<ino_t>(inode);
    m.shared_writable = perms[0] == 'r' && perms[1] == 'w' && perms[3] == 's';
    m.memfd = path_at > 0 && std::strncmp(line + path_at, "/memfd:", 7) == 0;
    found = m;
    break;
  }
  std::fclose(maps);
  return found;
}

// A descriptor of this process open on the memfd `m` maps, sealed against shrinking; -1 if none.
int descriptor_of(const Mapping& m) {
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return -1;
  int out = -1;
  while (dirent* e = readdir(dir)) {
    char* end = nullptr;
    const long fd = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0' || fd == dirfd(dir)) continue;
    struct stat st {};
    if (fstat(static_cast<int>(fd), &st) != 0 || !S_ISREG(st.st_mode) || st.st_ino != m.inode ||
        st.st_dev != m.dev)
      continue;
    const int seals = fcntl(static_cast<int>(fd), F_GET_SEALS);
    if (seals < 0 || (seals & F_SEAL_SHRINK) == 0) continue;  // the daemon would refuse it
    out = fcntl(static_cast<int>(fd), F_DUPFD_CLOEXEC, 0);
    break;
  }
  closedir(dir);
  return out;
}

}  // namespace

std::optional<MemfdRange> find_memfd(const void* data, size_t size) {
  const auto begin = reinterpret_cast<uintptr_t>(data);
  if (size == 0) return std::nullopt;
  const auto m = mapping_of(begin);
  // One mapping holds the whole range, and the daemon's mapping of the file sees what the caller
  // writes (a private mapping's writes would stay in the caller's copies).
  if (!m || !m->memfd || !m->shared_writable || size > m->end - begin) return std::nullopt;
  const int fd = descriptor_of(*m);
  if (fd < 0) return std::nullopt;
  return MemfdRange{fd, m->offset + (begin - m->begin)};
}

}  // namespace rdmad::nccl
