#!/bin/bash
# RoCEv2 interop, rxe side (guest 0, one rail, --tap): an rxe device on the tap NIC talks RC to the
# soft NIC on the host (tests/vm/host/interop_soft.sh, 10.200.0.254), both through the project's
# verbs interface (vm_interop_peer). Three phases, one connection each:
#   clean  every op both ways at every path MTU, byte-exact; rxe's counters agree with the soft
#          NIC's packet for packet (rxe has no ICRC counter: a bad ICRC shows as a packet missing
#          from rcvd_pkts), no drops on the soft side
#   lossy  netem (loss, reordering, delay) on both directions of the link: go-back-N and
#          retransmission interoperate, byte-exact
#   ecn    a RED queue with ECN marks rxe's packets CE: the soft NIC's notification point sends
#          CNPs to rxe, which drops them without error (it has no DCQCN); the CNPs are counted as
#          they arrive at the guest's NIC
# Args: GUEST BUILD_DIR [PHASE...] (default: clean lossy ecn; the host side must serve the same)
set -u
build=$2
shift 2
phases=("$@")
[ ${#phases[@]} -gt 0 ] || phases=(clean lossy ecn)
peer=$build/tests/vm/interop/vm_interop_peer
nic=eth$RDMAD_VM_RAILS
dev=rxe_tap
host=10.200.0.254:18515
kmod() { modprobe -d "$RDMAD_VM_MODROOT" -S "$RDMAD_VM_KVER" "$@"; }
die() {
  echo "interop_rxe: FAIL: $*"
  exit 1
}
run_peer() {
  echo "== phase $1"
  local t0=$SECONDS
  "$peer" --rdma-core "$dev" --connect "$host" --phase "$1" --timeout 150 || die "phase $1"
  echo "== phase $1 passed in $((SECONDS - t0)) s"
}

# A 9000-byte MTU on both ends (the host script sets tap0's): every RoCE path MTU up to 4096 fits.
ip link set "$nic" mtu 9000 || die "mtu"
rdma link add "$dev" type rxe netdev "$nic" || die "rdma link add $dev"
for ((i = 0; i < 200; i++)); do
  ibv_devinfo -d "$dev" 2>/dev/null | grep -q "active_mtu:.*4096" && break
  sleep 0.05
done
ibv_devinfo -d "$dev" | grep -E "state|active_mtu" | sed 's/^/interop_rxe: /'
ibv_devinfo -d "$dev" | grep -q PORT_ACTIVE || die "$dev did not become active"

phase_clean() { run_peer clean; }

phase_lossy() {
  kmod sch_netem && kmod ifb numifbs=0 && kmod sch_ingress && kmod cls_matchall && kmod act_mirred ||
    die "tc modules"
  local netem="netem loss 1% reorder 5% 25% delay 1ms"
  tc qdisc add dev "$nic" root $netem || die "egress netem"
  # The ingress direction through an ifb, so the soft NIC's packets are lost and reordered too.
  ip link add ifb0 type ifb && ip link set ifb0 up || die "ifb"
  tc qdisc add dev "$nic" handle ffff: ingress &&
    tc filter add dev "$nic" parent ffff: matchall action mirred egress redirect dev ifb0 &&
    tc qdisc add dev ifb0 root $netem || die "ingress netem"
  run_peer lossy
  tc -s qdisc show dev "$nic" | sed 's/^/interop_rxe: /'
  tc -s qdisc show dev ifb0 | sed 's/^/interop_rxe: /'
  tc qdisc del dev "$nic" root && tc qdisc del dev "$nic" ingress || die "removing netem"
}

phase_ecn() {
  kmod sch_tbf && kmod sch_red && kmod sch_ingress && kmod cls_u32 && kmod act_gact || die "tc modules"
  # 10 Mb/s out of the guest (well below what rxe pushes under TCG, so a queue builds even on a
  # loaded host), and RED marking (ECN) from 15 KB of average queue, dropping only past 200 KB:
  # rxe sends its data with ECT(0) (the rdma_core backend's traffic class).
  tc qdisc add dev "$nic" root handle 1: tbf rate 10mbit burst 16kb latency 200ms &&
    tc qdisc add dev "$nic" parent 1:1 handle 10: red limit 200000 min 15000 max 45000 avpkt 1100 burst 20 \
      bandwidth 10mbit probability 0.5 ecn || die "red"
  # CNPs (UDP to 4791, BTH opcode 0x81) arriving at the NIC, counted before rxe sees them.
  tc qdisc add dev "$nic" handle ffff: ingress &&
    tc filter add dev "$nic" parent ffff: protocol ip u32 match ip protocol 17 0xff match u16 4791 0xffff at 22 \
      match u8 0x81 0xff at 28 action pass || die "cnp filter"
  run_peer ecn
  tc -s qdisc show dev "$nic" | sed 's/^/interop_rxe: /'
  local stats cnps marked
  stats=$(tc -s filter show dev "$nic" ingress)
  cnps=$(sed -n 's/.*Sent [0-9]* bytes \([0-9]*\) pkt.*/\1/p' <<<"$stats" | head -1)
  marked=$(tc -s qdisc show dev "$nic" | sed -n 's/.*marked \([0-9]*\).*/\1/p' | head -1)
  echo "interop_rxe: RED marked ${marked:-?} packets; ${cnps:-no} CNPs reached $nic"
  [ "${marked:-0}" -gt 0 ] || die "RED marked nothing"
  [ "${cnps:-0}" -gt 0 ] || die "no CNP reached the guest"
  tc qdisc del dev "$nic" root && tc qdisc del dev "$nic" ingress || die "removing red"
}

for p in "${phases[@]}"; do "phase_$p"; done
exit 0
