// librdmad's GPU path — the CUDA driver loaded at run time, device checks, the page-aligned dma-buf
// export, the request to the daemon — against the project's fake CUDA driver
// (tests/support/fake_cuda), since these machines have no GPU. ctest runs each suite under one
// driver configuration (tests/unit/client/CMakeLists.txt): FakeCuda under the CUDA 12 and the
// CUDA 11 build; the others with the environment their name says. Run by hand, the binary finds no
// fake driver on its library path and every test skips with that reason.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "rdmad/rdmad.h"
#include "support/cuda_driver.h"
#include "unit/clients/server_fixture.h"

namespace rdmad::test {
namespace {

constexpr uint32_t kRw = RDMAD_ACCESS_LOCAL_WRITE | RDMAD_ACCESS_REMOTE_WRITE;

struct FakeCudaDriver : CudaDriver {
  int (*exports)(unsigned long long*, unsigned long long*) = nullptr;
  void (*fail_next_export)(int) = nullptr;

  // Empty when libcuda.so.1 is the fake driver (initialised when `init_devices`), else why not.
  std::string load_fake(bool init_devices = true) {
    std::string why = open();
    if (why.empty()) {
      exports = reinterpret_cast<decltype(exports)>(dlsym(lib, "rdmad_fake_cuda_exports"));
      fail_next_export = reinterpret_cast<decltype(fail_next_export)>(dlsym(lib, "rdmad_fake_cuda_fail_next_export"));
      if (exports == nullptr || fail_next_export == nullptr) why = "libcuda.so.1 is not the project's fake driver";
    }
    if (why.empty() && init_devices) why = load();
    return why.empty() ? why : why + " (ctest runs this binary with the fake CUDA driver on LD_LIBRARY_PATH)";
  }

  int export_count(unsigned long long* base = nullptr, unsigned long long* size = nullptr) const {
    return exports(base, size);
  }
};

class FakeCudaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::string why = environment_mismatch(); !why.empty()) GTEST_SKIP() << why;
    if (std::string why = cuda_.load_fake(init_devices()); !why.empty()) GTEST_SKIP() << why;
    srv_ = std::make_unique<TestServer>();
    ASSERT_EQ(rdmad_connect(srv_->path().c_str(), &client_), RDMAD_OK);
  }
  void TearDown() override {
    if (client_ != nullptr) rdmad_disconnect(client_);
  }
  virtual bool init_devices() const { return true; }
  // The driver configuration the suite expects: {variable, value} pairs, "" for unset.
  virtual std::vector<std::pair<const char*, const char*>> environment() const {
    return {{"RDMAD_FAKE_CUDA_DEVICES", ""}, {"RDMAD_FAKE_CUDA_VERSION", ""}, {"RDMAD_FAKE_CUDA_DMABUF", ""}};
  }
  std::string environment_mismatch() const {
    for (auto [name, want] : environment()) {
      const char* have = std::getenv(name);
      if (std::string(have == nullptr ? "" : have) != want)
        return std::string("this suite runs with ") + name + "=" + (*want ? want : "(unset)") + " (ctest sets it)";
    }
    return {};
  }

  unsigned long long alloc(size_t bytes, int device = 0) {
    EXPECT_TRUE(cuda_.use_device(device));
    unsigned long long p = 0;
    EXPECT_EQ(cuda_.mem_alloc(&p, bytes), 0);
    return p;
  }
  rdmad_status register_gpu(unsigned long long ptr, uint64_t length) {
    rdmad_mr* mr = nullptr;
    rdmad_status s = rdmad_register_gpu(client_, ptr, length, kRw, 0, &mr);
    EXPECT_EQ(mr, nullptr);
    return s;
  }
  std::string error() const { return rdmad_last_error(client_); }
  double dmabuf_requests(const char* result) {
    double v = srv_->metric("rdmad_client_requests_total", {{"op", "register_dmabuf"}, {"result", result}});
    return v < 0 ? 0 : v;
  }

  FakeCudaDriver cuda_;
  std::unique_ptr<TestServer> srv_;
  rdmad_client* client_ = nullptr;
};

using FakeCuda = FakeCudaTest;

TEST_F(FakeCuda, LocatesEachGpuByItsPciAddressInLowerCase) {
  unsigned long long on0 = alloc(1u << 20, 0), on1 = alloc(1u << 20, 1);
  rdmad_location where;
  ASSERT_EQ(rdmad_locate_gpu(on0 + 4096, &where), RDMAD_OK);
  EXPECT_EQ(where.kind, RDMAD_MEM_GPU);
  EXPECT_STREQ(where.pci_address, "0000:17:00.0");
  ASSERT_EQ(rdmad_locate_gpu(on1, &where), RDMAD_OK);
  EXPECT_STREQ(where.pci_address, "0000:ca:00.0");  // the driver says "0000:CA:00.0"
  int host = 0;
  EXPECT_EQ(rdmad_locate_gpu(reinterpret_cast<uint64_t>(&host), &where), RDMAD_ERR_INVALID_ARGUMENT);
  cuda_.mem_free(on0);
  cuda_.mem_free(on1);
}

// An interior, unaligned buffer: the library exports the whole pages around it and sends the
// buffer's offset in them; the daemon gets the exported fd and, as it is no dma-buf (this
// machine's kernel has no exporter, so the fake driver hands out a memfd), refuses it by name.
TEST_F(FakeCuda, ExportsThePagesAroundTheBufferAndTheDaemonChecksTheFd) {
  unsigned long long dptr = alloc(4u << 20);
  const size_t fds_before = open_fd_count();
  const int exports_before = cuda_.export_count();
  EXPECT_EQ(register_gpu(dptr + 4096 + 17, 1u << 20), RDMAD_ERR_INVALID_ARGUMENT);
  EXPECT_NE(error().find("fd is not a dma-buf (it is /memfd:fake-cuda-dmabuf"), std::string::npos) << error();
  unsigned long long base = 0, size = 0;
  EXPECT_EQ(cuda_.export_count(&base, &size), exports_before + 1);
  EXPECT_EQ(base, dptr + 4096);
  EXPECT_EQ(size, (1u << 20) + 4096);  // 17 + 1 MiB bytes touch 257 pages
  EXPECT_EQ(dmabuf_requests("invalid_argument"), 1);
  EXPECT_EQ(srv_->region_count(), 0u);
  // The library closed its copy of the export, the daemon the one it received.
  EXPECT_TRUE(eventually([&] { return open_fd_count() == fds_before; })) << open_fd_count() << " vs " << fds_before;
  cuda_.mem_free(dptr);
}

TEST_F(FakeCuda, HostMemoryIsRefusedBeforeAnyExport) {
  std::vector<char> host(8192);
  const int exports_before = cuda_.export_count();
  EXPECT_EQ(register_gpu(reinterpret_cast<uint64_t>(host.data()), host.size()), RDMAD_ERR_INVALID_ARGUMENT);
  EXPECT_NE(error().find("not a CUDA device pointer"), std::string::npos) << error();
  EXPECT_NE(error().find("CUDA_ERROR_INVALID_VALUE"), std::string::npos) << error();
  EXPECT_EQ(cuda_.export_count(), exports_before);
  EXPECT_EQ(dmabuf_requests("invalid_argument"), 0);  // nothing reached the daemon
}

TEST_F(FakeCuda, RangesLeavingTheirAllocationAreRefusedBeforeAnyExport) {
  unsigned long long dptr = alloc(2u << 20);  // the driver's 2 MiB granularity: exactly 2 MiB
  const int exports_before = cuda_.export_count();
  EXPECT_EQ(register_gpu(dptr + (2u << 20) - 4096, 8192), RDMAD_ERR_INVALID_ARGUMENT);
  EXPECT_NE(error().find("leaves its allocation"), std::string::npos) << error();
  EXPECT_EQ(register_gpu(dptr + 64, ~uint64_t{0} - 32), RDMAD_ERR_INVALID_ARGUMENT);  // wraps around
  EXPECT_EQ(register_gpu(dptr, 0), RDMAD_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(cuda_.export_count(), exports_before);
  EXPECT_EQ(dmabuf_requests("invalid_argument"), 0);
  cuda_.mem_free(dptr);
}

TEST_F(FakeCuda, ADriverErrorIsReportedByName) {
  unsigned long long dptr = alloc(1u << 20);
  cuda_.fail_next_export(801);  // CUDA_ERROR_NOT_SUPPORTED, e.g. memory the driver cannot export
  EXPECT_EQ(register_gpu(dptr, 4096), RDMAD_ERR_CUDA);
  EXPECT_NE(error().find("cuMemGetHandleForAddressRange(DMA_BUF_FD) failed: CUDA_ERROR_NOT_SUPPORTED (801)"),
            std::string::npos)
      << error();
  EXPECT_EQ(dmabuf_requests("invalid_argument"), 0);
  cuda_.mem_free(dptr);
}

// RDMAD_FAKE_CUDA_DMABUF=0: a GPU whose driver cannot export dma-buf (the proprietary kernel module).
class FakeCudaNoDmabuf : public FakeCudaTest {
  std::vector<std::pair<const char*, const char*>> environment() const override {
    return {{"RDMAD_FAKE_CUDA_DMABUF", "0"}};
  }
};

TEST_F(FakeCudaNoDmabuf, RegistrationSaysWhatIsMissing) {
  unsigned long long dptr = alloc(1u << 20);
  EXPECT_EQ(register_gpu(dptr, 4096), RDMAD_ERR_NOT_SUPPORTED);
  EXPECT_NE(error().find("CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED = 0"), std::string::npos) << error();
  EXPECT_NE(error().find("open kernel module"), std::string::npos) << error();
  EXPECT_EQ(cuda_.export_count(), 0);
  rdmad_location where;
  EXPECT_EQ(rdmad_locate_gpu(dptr, &where), RDMAD_OK);  // locating needs no export
  cuda_.mem_free(dptr);
}

// The CUDA 11 driver build with RDMAD_FAKE_CUDA_VERSION=11040: no cuMemGetHandleForAddressRange.
class FakeCudaTooOld : public FakeCudaTest {
  std::vector<std::pair<const char*, const char*>> environment() const override {
    return {{"RDMAD_FAKE_CUDA_VERSION", "11040"}};
  }
};

TEST_F(FakeCudaTooOld, RegistrationAndLocationNameTheVersionNeeded) {
  unsigned long long dptr = alloc(1u << 20);
  EXPECT_EQ(register_gpu(dptr, 4096), RDMAD_ERR_CUDA);
  EXPECT_NE(error().find("CUDA driver too old"), std::string::npos) << error();
  EXPECT_NE(error().find("11.7"), std::string::npos) << error();
  rdmad_location where;
  EXPECT_EQ(rdmad_locate_gpu(dptr, &where), RDMAD_ERR_CUDA);
  cuda_.mem_free(dptr);
}

// RDMAD_FAKE_CUDA_DEVICES=0: the driver is installed but finds no GPU, so cuInit fails.
class FakeCudaNoDevice : public FakeCudaTest {
  bool init_devices() const override { return false; }
  std::vector<std::pair<const char*, const char*>> environment() const override {
    return {{"RDMAD_FAKE_CUDA_DEVICES", "0"}};
  }
};

TEST_F(FakeCudaNoDevice, RegistrationReportsTheInitError) {
  EXPECT_EQ(register_gpu(0x7f0000000000, 4096), RDMAD_ERR_CUDA);
  EXPECT_NE(error().find("cuInit failed: CUDA_ERROR_NO_DEVICE (100)"), std::string::npos) << error();
  rdmad_location where;
  EXPECT_EQ(rdmad_locate_gpu(0x7f0000000000, &where), RDMAD_ERR_CUDA);
  EXPECT_EQ(dmabuf_requests("invalid_argument"), 0);
}

}  // namespace
}  // namespace rdmad::test
