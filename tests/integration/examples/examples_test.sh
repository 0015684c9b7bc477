#!/usr/bin/env bash
# The client examples, linked against the installed-style shared librdmad.so, against a running
# daemon with two soft NICs: register_host registers 1 MiB and prints a key per NIC; register_gpu
# skips without CUDA, and under the fake CUDA driver (tests/support/fake_cuda) gets the daemon's
# or the driver's reason, loading libcuda.so.1 from inside the shared library.
# Usage: examples_test.sh EXAMPLES_DIR FAKE_CUDA12_DIR
. "$RDMAD_SOURCE_DIR/tests/integration/deploy/lib.sh"
examples=$1
fake_cuda=$2

use_work_dir

start_rdmad "$work" "$(cat <<TOML
[[nic]]
name = "soft0"
backend = "soft"
address = "127.0.0.1"
udp_port = 0
[[nic]]
name = "soft1"
backend = "soft"
address = "127.0.0.1"
udp_port = 0
TOML
)"
sock=$RDMAD_SOCK

# run NAME EXPECTED_STATUS [ENV...]: runs an example, keeps its output in $out.
run() {
  local name=$1 want=$2 status=0
  shift 2
  out=$(env "$@" "$examples/rdmad_example_$name" "$sock" 2>&1) || status=$?
  [ "$status" -eq "$want" ] || fail "$name ($*) exited $status, expected $want: $out"
}
expect() { grep -qF -- "$1" <<<"$out" || fail "expected '$1' in: $out"; }

run register_host 0
expect "length 1048576"
[ "$(grep -c '^nic [01] lkey 0x' <<<"$out")" -eq 2 ] || fail "expected a key per NIC: $out"

run register_gpu 0 LD_LIBRARY_PATH=/nonexistent
expect "skipping: CUDA driver not available"

run register_gpu 0 LD_LIBRARY_PATH="$fake_cuda" RDMAD_FAKE_CUDA_DMABUF=0
expect "register_gpu: not supported"
expect "CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED = 0"

# The export succeeds; the daemon refuses the fd, which this kernel cannot make a real dma-buf.
run register_gpu 1 LD_LIBRARY_PATH="$fake_cuda"
expect "fd is not a dma-buf (it is /memfd:fake-cuda-dmabuf"

echo "PASS: register_host and register_gpu (no CUDA, no dma-buf support, fake export) against a live daemon"
