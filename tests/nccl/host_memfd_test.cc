// find_memfd (nccl/src/host_memfd.cc): which host ranges the plugin registers as they are, and at
// which offset of their memfd.
#include "../../nccl/src/host_memfd.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <vector>

namespace rdmad::nccl {
namespace {

const size_t kPage = static_cast<size_t>(sysconf(_SC_PAGESIZE));

// A memfd of `pages` pages, sealed against shrinking when `seal`.
int make_memfd(size_t pages, bool seal) {
  int fd = memfd_create("host-memfd-test", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  EXPECT_GE(fd, 0);
  EXPECT_EQ(ftruncate(fd, static_cast<off_t>(pages * kPage)), 0);
  if (seal) {
    EXPECT_EQ(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK), 0);
  }
  return fd;
}

ino_t inode(int fd) {
  struct stat st {};
  EXPECT_EQ(fstat(fd, &st), 0);
  return st.st_ino;
}

TEST(HostMemfd, ASharedMappingIsFoundWithItsFileOffset) {
  const int fd = make_memfd(8, true);
  // Pages 2..7 of the file, mapped; the range starts 100 bytes into the mapping's second page.
  auto* p =
      static_cast<uint8_t*>(mmap(nullptr, 6 * kPage, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 2 * kPage));
  ASSERT_NE(p, MAP_FAILED);
  auto r = find_memfd(p + kPage + 100, 4 * kPage);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->offset, 3 * kPage + 100);
  EXPECT_NE(r->fd, fd);  // a duplicate, the caller's to close
  EXPECT_EQ(inode(r->fd), inode(fd));
  close(r->fd);
  // The whole mapping, to its last byte, and not one byte beyond.
  r = find_memfd(p, 6 * kPage);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->offset, 2 * kPage);
  close(r->fd);
  EXPECT_FALSE(find_memfd(p, 6 * kPage + 1).has_value());
  munmap(p, 6 * kPage);
  close(fd);
}

TEST(HostMemfd, WhatTheDaemonCouldNotMapAsItIsIsNotFound) {
  EXPECT_FALSE(find_memfd(nullptr, 0).has_value());
  std::vector<uint8_t> heap(1 << 20);
  EXPECT_FALSE(find_memfd(heap.data(), heap.size()).has_value());  // malloc'd
  int x = 0;
  EXPECT_FALSE(find_memfd(&x, sizeof x).has_value());  // the stack
  // A private mapping: the caller's writes stay in its own copies.
  const int sealed = make_memfd(2, true);
  void* priv = mmap(nullptr, 2 * kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE, sealed, 0);
  ASSERT_NE(priv, MAP_FAILED);
  EXPECT_FALSE(find_memfd(priv, kPage).has_value());
  // Read-only: the daemon would write into it.
  void* ro = mmap(nullptr, 2 * kPage, PROT_READ, MAP_SHARED, sealed, 0);
  ASSERT_NE(ro, MAP_FAILED);
  EXPECT_FALSE(find_memfd(ro, kPage).has_value());
  // Not sealed against shrinking: the daemon refuses it.
  const int unsealed = make_memfd(2, false);
  void* open_ended = mmap(nullptr, 2 * kPage, PROT_READ | PROT_WRITE, MAP_SHARED, unsealed, 0);
  ASSERT_NE(open_ended, MAP_FAILED);
  EXPECT_FALSE(find_memfd(open_ended, kPage).has_value());
  // Sealed and shared, but its descriptor is closed: nothing to hand the daemon.
  const int closed = make_memfd(2, true);
  void* orphan = mmap(nullptr, 2 * kPage, PROT_READ | PROT_WRITE, MAP_SHARED, closed, 0);
  ASSERT_NE(orphan, MAP_FAILED);
  auto found = find_memfd(orphan, kPage);
  ASSERT_TRUE(found.has_value());
  close(found->fd);
  close(closed);
  EXPECT_FALSE(find_memfd(orphan, kPage).has_value());
  for (void* m : {priv, ro, open_ended, orphan}) munmap(m, 2 * kPage);
  close(sealed);
  close(unsealed);
}

}  // namespace
}  // namespace rdmad::nccl
