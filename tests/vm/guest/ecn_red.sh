#!/bin/bash
# DCQCN with a real marker (guest 0): two soft NICs of the project's backend in one guest, A on va
# (10.9.0.1, namespace "a") and B on vb (10.9.0.2, namespace "b"), joined by a veth pair (the
# guest's own namespace has rxe0 on UDP 4791).
# A's side leaves through tbf (20 Mb/s) with RED (ECN) under it: the kernel marks CE, B's
# notification point sends CNPs, A's reaction point cuts and recovers (vm_ecn_loop checks that and
# every byte). Here: RED marked packets, and B counted each marked packet that got through: RED
# marks before its queue's limit, so a marked packet may still be dropped (pdrop).
# Args: GUEST BUILD_DIR [vm_ecn_loop options...]
set -u
build=$2
kmod() { modprobe -d "$RDMAD_VM_MODROOT" -S "$RDMAD_VM_KVER" "$@"; }
die() {
  echo "ecn_red: FAIL: $*"
  exit 1
}
kmod veth && kmod sch_tbf && kmod sch_red || die "modules"
ip netns add a && ip netns add b || die "netns"
ip -n a link set lo up && ip -n b link set lo up || die "lo"
ip -n a link add va type veth peer name vb netns b || die "veth"
ip -n a addr add 10.9.0.1/24 dev va && ip -n a link set va up || die "va"
ip -n b addr add 10.9.0.2/24 dev vb && ip -n b link set vb up || die "vb"
# The bottleneck: 20 Mb/s, RED marking from 15 KB of average queue (all of it above 45 KB),
# dropping only past 200 KB. The soft NICs send data with ECT(0).
tc -n a qdisc add dev va root handle 1: tbf rate 20mbit burst 16kb latency 100ms &&
  tc -n a qdisc add dev va parent 1:1 handle 10: red limit 200000 min 15000 max 45000 avpkt 1100 burst 20 \
    bandwidth 20mbit probability 0.5 ecn || die "red"

out=$("$build/tests/vm/interop/vm_ecn_loop" --a 10.9.0.1 --a-netns a --b 10.9.0.2 --b-netns b --line-rate-mbps 100 "${@:3}" 2>&1)
rc=$?
echo "$out"
tc -n a -s qdisc show dev va | sed 's/^/ecn_red: /'
[ $rc -eq 0 ] || die "vm_ecn_loop"
stats=$(tc -n a -s qdisc show dev va)
red=$(sed -n 's/.*marked \([0-9]*\).*/\1/p' <<<"$stats" | head -1)
pdrop=$(sed -n 's/.*pdrop \([0-9]*\).*/\1/p' <<<"$stats" | head -1)
ours=$(sed -n 's/^ecn_loop: marked=\([0-9]*\)$/\1/p' <<<"$out")
echo "ecn_red: RED marked ${red:-?} packets (and dropped ${pdrop:-?} past its limit), B counted ${ours:-?} CE-marked"
[ "${red:-0}" -gt 0 ] || die "RED marked nothing"
[ -n "$ours" ] && [ "$ours" -le "$red" ] && [ "$ours" -ge $((red - pdrop)) ] ||
  die "B's count of CE-marked packets is not what RED marked less what it dropped"
exit 0
