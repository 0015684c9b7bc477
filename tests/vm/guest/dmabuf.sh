#!/bin/bash
# Real dma-buf (vgem) in the guest: the fake CUDA driver exports vgem buffers, the daemon maps them
# for soft NICs and rxe refuses them. Args: GUEST BUILD_DIR MODROOT-free (boot.sh loaded rxe).
build=$2
modroot=$(sed -n 's/.* rdmad\.modroot=\([^ ]*\).*/\1/p' /proc/cmdline)
kver=$(sed -n 's/.* rdmad\.kver=\([^ ]*\).*/\1/p' /proc/cmdline)
modprobe -d "$modroot" -S "$kver" vgem || { echo "dmabuf: modprobe vgem failed"; exit 1; }
export LD_LIBRARY_PATH="$build/tests/support/fake_cuda12${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
status=0
"$build/tests/vm/dmabuf/vm_dmabuf_test" --gtest_brief=1 || status=1
"$build/tests/integration/ipc/ipc_gpu_registration_test" --gtest_brief=1 || status=1
exit $status
