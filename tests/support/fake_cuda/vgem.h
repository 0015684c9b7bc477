#pragma once
// "Device memory" that is a real dma-buf exporter's: a dumb buffer of the kernel's vgem driver
// (virtual GEM, made for testing dma-buf sharing), mapped into this process and exported with
// PRIME as a real dma-buf fd. The DRM ioctls are the kernel's documented uapi (drm.h,
// drm_mode.h), declared here rather than taken from libdrm.
#include <cstddef>
#include <cstdint>

namespace rdmad::fake_cuda {

struct VgemBuffer {
  uint32_t handle = 0;
  void* addr = nullptr;
  size_t size = 0;
};

/// The vgem card's descriptor (opened once; -1 when this kernel has no vgem device).
int vgem_card();
/// A dumb buffer of `size` bytes (a multiple of 4096) mapped read-write; false when it cannot.
bool vgem_alloc(size_t size, VgemBuffer* out);
void vgem_free(VgemBuffer& b);
/// A dma-buf fd of the whole buffer (PRIME), or -1.
int vgem_export(const VgemBuffer& b);

}  // namespace rdmad::fake_cuda
