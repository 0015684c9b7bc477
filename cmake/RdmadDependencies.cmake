# Every dependency is a Debian 12 package; scripts/setup-deps installs exactly these.
find_package(PkgConfig REQUIRED)
find_package(Threads REQUIRED)
pkg_check_modules(IBVERBS REQUIRED IMPORTED_TARGET libibverbs)   # libibverbs-dev
pkg_check_modules(RDMACM REQUIRED IMPORTED_TARGET librdmacm)     # librdmacm-dev
pkg_check_modules(SYSTEMD REQUIRED IMPORTED_TARGET libsystemd)   # libsystemd-dev
find_package(Boost 1.74 REQUIRED)                                # libboost-dev (Asio)
find_package(fmt REQUIRED)                                       # libfmt-dev
find_package(spdlog REQUIRED)                                    # libspdlog-dev
find_package(prometheus-cpp REQUIRED COMPONENTS core pull)       # prometheus-cpp-dev
find_package(civetweb REQUIRED)     # libcivetweb-dev (a dependency of prometheus-cpp-dev): /healthz, /readyz
find_package(tomlplusplus REQUIRED)                              # libtomlplusplus-dev
find_package(CLI11 REQUIRED)                                     # libcli11-dev
if(RDMAD_BUILD_TESTS)
  find_package(GTest REQUIRED)                                   # libgtest-dev, libgmock-dev
endif()
if(RDMAD_BUILD_BENCH)
  find_package(benchmark REQUIRED)                               # libbenchmark-dev
endif()
if(RDMAD_WITH_DPDK)
  pkg_check_modules(DPDK REQUIRED IMPORTED_TARGET libdpdk)       # libdpdk-dev (optional: the dpdk backend)
endif()
