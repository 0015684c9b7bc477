// Compile-time check of the fake CUDA driver's constants against the CUDA toolkit headers, where
// they are installed (RDMAD_CUDA_INCLUDE_DIR); without them this file checks nothing.
#include "fake_cuda_abi.h"

#if __has_include(<cuda.h>)
#include <cuda.h>

namespace rdmad::fake_cuda {
static_assert(kSuccess == CUDA_SUCCESS && kInvalidValue == CUDA_ERROR_INVALID_VALUE &&
              kOutOfMemory == CUDA_ERROR_OUT_OF_MEMORY && kNotInitialized == CUDA_ERROR_NOT_INITIALIZED &&
              kNoDevice == CUDA_ERROR_NO_DEVICE && kInvalidDevice == CUDA_ERROR_INVALID_DEVICE &&
              kInvalidContext == CUDA_ERROR_INVALID_CONTEXT && kNotFound == CUDA_ERROR_NOT_FOUND &&
              kNotSupported == CUDA_ERROR_NOT_SUPPORTED);
static_assert(kPointerAttributeMemoryType == CU_POINTER_ATTRIBUTE_MEMORY_TYPE &&
              kPointerAttributeDeviceOrdinal == CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL &&
              kMemoryTypeDevice == CU_MEMORYTYPE_DEVICE &&
              kDeviceAttributeDmaBufSupported == CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED &&
              kMemRangeHandleTypeDmaBufFd == CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD &&
              kMemRangeFlagDmaBufMappingTypePcie == CU_MEM_RANGE_FLAG_DMA_BUF_MAPPING_TYPE_PCIE);
static_assert(kProcAddressSuccess == CU_GET_PROC_ADDRESS_SUCCESS &&
              kProcAddressSymbolNotFound == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND &&
              kProcAddressVersionNotSufficient == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
static_assert(sizeof(CUdeviceptr) == sizeof(unsigned long long));
}  // namespace rdmad::fake_cuda
#endif
