#!/bin/bash
# Runs in the guest, in the host's root (read-only, over 9p): loads the verbs stack from the
# kernel's unpacked modules, brings up the rails (eth<r>: 10.<r+1>.0.<guest+1>/24, netdev MTU
# rdmad.mtu, rxe<r> on it)
# and the optional tap NIC (10.200.0.<guest+1>/24), then runs the test's script as
# `bash SCRIPT GUEST_INDEX ARGS...` and reports its exit code on the console.
arg() { sed -n "s/.* rdmad\.$1=\([^ ]*\).*/\1/p" /proc/cmdline; }
guest=$(arg guest)
rails=$(arg rails)
tap=$(arg tap)
mtu=$(arg mtu)
modroot=$(arg modroot)
kver=$(arg kver)
cmd=$(arg cmd)
export HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export RDMAD_VM_GUEST=$guest RDMAD_VM_GUESTS=$(arg guests) RDMAD_VM_RAILS=$rails
# The kernel's modules are not under /lib/modules of the host's root: a script that needs more of
# them (qdiscs, tc actions) loads them with `modprobe -d "$RDMAD_VM_MODROOT" -S "$RDMAD_VM_KVER"`.
export RDMAD_VM_MODROOT=$modroot RDMAD_VM_KVER=$kver
mountpoint -q /mnt && export RDMAD_VM_OUT=/mnt
cd /tmp

finish() {
  echo "RDMAD-VM-EXIT=$1"
  sync
  /usr/bin/busybox poweroff -f
  sleep 5
}

setup() {
  # crc32_generic: rxe's ICRC needs a crc32 (crc32-pclmul does not load under TCG).
  for m in crc32_generic rdma_rxe; do
    modprobe -d "$modroot" -S "$kver" "$m" || { echo "boot: modprobe $m failed"; return 1; }
  done
  ip link set lo up
  for ((r = 0; r < rails; r++)); do
    ip link set "eth$r" mtu "${mtu:-1500}" up || return 1
    ip addr add "10.$((r + 1)).0.$((guest + 1))/24" dev "eth$r" || return 1
    rdma link add "rxe$r" type rxe netdev "eth$r" || { echo "boot: rdma link add rxe$r failed"; return 1; }
  done
  if [ "$tap" = 1 ]; then
    ip link set "eth$rails" up && ip addr add "10.200.0.$((guest + 1))/24" dev "eth$rails" || return 1
  fi
  # Wait for the ports to be active (rxe follows the netdev's carrier).
  for ((i = 0; i < 200; i++)); do
    n=$(ibv_devinfo 2>/dev/null | grep -c PORT_ACTIVE)
    [ "$n" -ge "$rails" ] && return 0
    sleep 0.05
  done
  echo "boot: only $n of $rails rxe ports became active"
  ibv_devinfo
  return 1
}

if ! setup; then finish 124; fi
echo "boot: guest $guest up: $rails rail(s), rxe ready"
read -ra words <<<"${cmd//%20/ }"
bash "${words[0]}" "$guest" "${words[@]:1}"
finish $?
