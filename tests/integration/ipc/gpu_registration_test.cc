// GPU memory through librdmad: runs only where the CUDA driver and a GPU exist. Against the soft
// backend the export must succeed on the client side and the daemon must refuse with the reason.
#include <gtest/gtest.h>

#include <cstring>

#include "rdmad/rdmad.h"
#include "support/cuda_driver.h"
#include "unit/clients/server_fixture.h"

namespace rdmad::test {
namespace {

// The client library exports device memory as a dma-buf (a real one, from vgem, in the guest that
// runs this: vm_dmabuf) and the client service validates it; the SoftRegistrar double registers
// no dma-buf, and the reason reaches the client.
TEST(IpcGpu, ExportsDmabufAndSoftRegistrarRefusesWithReason) {
  CudaDriver cuda;
  if (std::string why = cuda.load(); !why.empty()) FAIL() << why << " (vm_dmabuf sets LD_LIBRARY_PATH)";
  unsigned long long dptr = 0;
  ASSERT_EQ(cuda.mem_alloc(&dptr, 4u << 20), 0);
  TestServer srv;
  rdmad_client* c = nullptr;
  ASSERT_EQ(rdmad_connect(srv.path().c_str(), &c), RDMAD_OK);
  rdmad_location where;
  ASSERT_EQ(rdmad_locate_gpu(dptr, &where), RDMAD_OK);
  EXPECT_EQ(std::strlen(where.pci_address), 12u) << where.pci_address;  // "0000:17:00.0"
  rdmad_mr* mr = nullptr;
  // vgem exports whole buffers: the range starts at the allocation (interior pointers are the
  // client library's unit tests' business, tests/unit/client).
  rdmad_status s = rdmad_register_gpu(c, dptr, 1u << 20, RDMAD_ACCESS_LOCAL_WRITE, 0, &mr);
  EXPECT_EQ(s, RDMAD_ERR_NOT_SUPPORTED) << rdmad_last_error(c);
  std::string why = rdmad_last_error(c);
  EXPECT_NE(why.find("backend soft"), std::string::npos) << why;  // not "not a dma-buf": it is a real one
  EXPECT_EQ(srv.region_count(), 0u);
  rdmad_disconnect(c);
  cuda.mem_free(dptr);
}

}  // namespace
}  // namespace rdmad::test
