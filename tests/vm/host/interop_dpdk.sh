#!/bin/bash
# RoCEv2 interop, dpdk side: as interop_soft.sh, but the host's NIC is a dpdk NIC, a net_af_packet
# port on tap0 with an address of its own (10.200.0.253: it answers the guest's ARP itself, beside
# the kernel's 10.200.0.254 on the same tap, where the channel listens). The guest's rxe talks RC to
# packets DPDK builds and parses.
# Args: BUILD_DIR [vm_interop_peer options...]
set -eu
build=$1
shift
ip link set tap0 mtu 9000
exec "$build/tests/vm/interop/vm_interop_peer" --dpdk 10.200.0.253 \
  --devargs "net_af_packet0,iface=tap0,framesz=4352,blocksz=69632,framecnt=512" --listen 10.200.0.254:18515 "$@"
