// Driver API values the fake CUDA driver uses, from cuda.h; fake_cuda_abi_check.cc compares them
// with the toolkit headers where those are installed.
#pragma once

namespace rdmad::fake_cuda {

constexpr int kSuccess = 0;
constexpr int kInvalidValue = 1;
constexpr int kOutOfMemory = 2;
constexpr int kNotInitialized = 3;
constexpr int kNoDevice = 100;
constexpr int kInvalidDevice = 101;
constexpr int kInvalidContext = 201;
constexpr int kNotFound = 500;
constexpr int kNotSupported = 801;
constexpr int kPointerAttributeMemoryType = 2;
constexpr int kPointerAttributeDeviceOrdinal = 9;
constexpr unsigned kMemoryTypeDevice = 2;
constexpr int kDeviceAttributeDmaBufSupported = 124;
constexpr int kMemRangeHandleTypeDmaBufFd = 1;
constexpr unsigned long long kMemRangeFlagDmaBufMappingTypePcie = 1;
constexpr int kProcAddressSuccess = 0;
constexpr int kProcAddressSymbolNotFound = 1;
constexpr int kProcAddressVersionNotSufficient = 2;

}  // namespace rdmad::fake_cuda
