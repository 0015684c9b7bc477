#!/bin/bash
# RoCEv2 interop, soft side: runs on the host in the harness's namespace (rdmad_vm.py --host-cmd),
# beside tests/vm/guest/interop_rxe.sh. tap0 gets a 9000-byte MTU before the soft NIC opens (its
# port MTU follows the interface), then the soft peer serves the guest's phases.
# Args: BUILD_DIR [vm_interop_peer options...]
set -eu
build=$1
shift
ip link set tap0 mtu 9000
exec "$build/tests/vm/interop/vm_interop_peer" --soft 10.200.0.254 --listen 10.200.0.254:18515 "$@"
