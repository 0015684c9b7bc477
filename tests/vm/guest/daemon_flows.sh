#!/bin/bash
# rdmad with backend = "rdma_core" in two guests (vm0, vm1), each with rxe0 and rxe1 as [[nic]]s
# (two rails), peered over TLS with a PSK: host-memory registrations, an export, and flows over
# both rails — WRITE, READ and SEND, byte-exact — then rail 1 cut in vm0 mid-transfer (`ip link set
# eth1 down`): the transfer completes byte-exact on rail 0, and after `ip link set eth1 up` the rail
# is rebuilt; then eth1's address changes, the daemon re-selects rxe1's GID and rebuilds the lane on
# it, and rail 1 carries chunks again once its path check passed. rdmactl nics and /metrics show the rxe devices with their
# hw_counters. Then NCCL's calls through the plugin: a 4-rank ring AllReduce, 2 ranks per guest.
# Args: GUEST BUILD_DIR (guest 0 is the initiator, guest 1 the target).
guest=$1
build=$2
dir=${RDMAD_VM_OUT:?the guests need the shared directory}
source "$(dirname "$0")/daemon_lib.sh"
source "$(dirname "$0")/perftest_lib.sh"
client=$build/tests/vm/vm_flow_client
bytes=$((8 << 20))
trap 'stop_daemon >/dev/null 2>&1' EXIT

check() {
  if ! "$@"; then
    say "FAILED: $*"
    dump_log
    exit 1
  fi
}

check install_key
check write_config "vm$guest"
check start_daemon
say "rdmad is up"

if [ "$guest" = 1 ]; then
  check "$client" target --peer vm0 --dir "$dir" --bytes $bytes --recv 65536 --expect-seed 5 --timeout 90
else
  check "$client" initiator --peer vm1 --dir "$dir" --phase basic --bytes $bytes --send 65536 --seed 1
  # Both rails carried chunks of the first phase.
  check metric_at_least rdmad_balancer_bytes_sent_total 'device="rxe0"' 1
  check metric_at_least rdmad_balancer_bytes_sent_total 'device="rxe1"' 1
  check "$client" initiator --peer vm1 --dir "$dir" --phase cut --bytes $bytes --seed 4 --request 131072 \
    --cut-after 1 --cut "ip link set eth1 down"
  check metric_at_least rdmad_balancer_failovers_total 'device="rxe1"' 1
  say "rail 1 failed over; bringing eth1 back"
  rebuilds=$(metric rdmad_peer_rebuilds_total 'cause="path_fault"')
  checks=$(metric rdmad_balancer_rejoin_checks_total 'device="rxe1",result="ok"')
  check ip link set eth1 up
  check wait_until 30 port_active rxe1
  check wait_until 30 metric_at_least rdmad_peer_rebuilds_total 'cause="path_fault"' $((${rebuilds:-0} + 1))
  # An address change on rail 1: the daemon re-selects the source GID, re-advertises it in a
  # rebuild and the lane's QPs send from the new address (the old one is gone, so the phase below
  # only moves bytes over rxe1 if the lane really was rebuilt on the new GID).
  say "moving eth1 from 10.2.0.1 to 10.2.0.11"
  rebuilds=$(metric rdmad_peer_rebuilds_total 'cause="path_fault"')
  # The new address is a secondary one of the same subnet: promoted, not deleted with the primary.
  check sh -c 'echo 1 >/proc/sys/net/ipv4/conf/eth1/promote_secondaries'
  check ip addr add 10.2.0.11/24 dev eth1
  check ip addr del 10.2.0.1/24 dev eth1
  check wait_until 30 grep -qE 'source gid changed nic=rail1 from=\S+ to=(::ffff:)?10\.2\.0\.11 ' "$run_dir/rdmad.log"
  check wait_until 30 metric_at_least rdmad_peer_rebuilds_total 'cause="path_fault"' $((${rebuilds:-0} + 1))
  before=$(metric rdmad_balancer_bytes_sent_total 'device="rxe1"')
  check "$client" initiator --peer vm1 --dir "$dir" --phase again --bytes $bytes --seed 5 --request 131072
  after=$(metric rdmad_balancer_bytes_sent_total 'device="rxe1"')
  say "rxe1 carried $((${after%.*} - ${before%.*})) bytes after it rejoined"
  check test "${after%.*}" -gt "${before%.*}"
  # It rejoined after its path check (a zero-length RDMA WRITE on each of its QPs) passed on rxe
  # (one more than the checks before the cut: the first one, when the session started).
  check metric_at_least rdmad_balancer_rejoin_checks_total 'device="rxe1",result="ok"' $((${checks%.*} + 1))
  # perftest as the reference (BENCHMARKS.md): rdmad's flows over both rails, then ib_write_bw on
  # rxe0 and rxe1 at once, the same bytes in the same request size. Reported, not asserted (TCG).
  check "$client" initiator --peer vm1 --dir "$dir" --phase bw --bytes $bytes --seed 5 --request 131072 \
    --window 8 --rounds 3 --done
fi

# ib_write_bw on both rails at once, 3 rounds: half of the flows' bytes on each (guest 1 serves).
perftest_rounds() {
  local r i pids sum out g
  for ((r = 1; r <= 3; r++)); do
    pids=() sum=0
    for i in 0 1; do
      g=$(roce_v2_gid rxe$i) || { say "no RoCE v2 GID on rxe$i"; return 1; }
      cmd=(ib_write_bw -d rxe$i -x "$g" -p $((18601 + i)) -s 131072 -n $((bytes / 4 / 131072)) --report_gbits -F)
      if [ "$guest" = 1 ]; then
        timeout 90 "${cmd[@]}" >/tmp/perftest-$i.out 2>&1 &
      else
        perftest_client 10.$((i + 1)).0.2 "${cmd[@]}" >/tmp/perftest-$i.out &
      fi
      pids+=($!)
    done
    for i in 0 1; do
      wait "${pids[$i]}" || { say "ib_write_bw on rxe$i failed"; cat /tmp/perftest-$i.out; return 1; }
    done
    [ "$guest" = 1 ] && continue
    for i in 0 1; do
      out=$(awk '$1 == 131072 { print $4 }' /tmp/perftest-$i.out)
      sum=$(awk -v a="$sum" -v b="$out" 'BEGIN { print a + b }')
    done
    echo "report: ib_write_bw on rxe0 and rxe1 at once, 131072 B x $((bytes / 4 / 131072)) each, round $r: $sum Gb/s"
  done
  [ "$guest" = 0 ] && echo "report: ib_write_bw -d rxeN -x GID -p 1860N -s 131072 -n $((bytes / 4 / 131072)) --report_gbits -F [10.N.0.2]"
  return 0
}
check perftest_rounds

# NCCL over rxe: the plugin (libnccl-net-rdmad.so) driven as NCCL drives it (tests/nccl/nccl_harness,
# as nccl_plugin_test does on the host): a float32 ring AllReduce and an AllGather over 4 ranks,
# 0 and 1 on vm0, 2 and 3 on vm1, the ring alternating guests so every hop is a flow over the rxe
# rails; every element checked exactly. Handles go through the shared directory (NCCL's bootstrap),
# the rendezvous over eth0.
nccl_ranks() {
  local first=$((guest * 2)) r out pids=()
  mkdir -p "$dir/nccl"
  for r in $first $((first + 1)); do
    RDMAD_SOCKET=$socket RDMAD_NCCL_SOCKET_IFNAME=eth0 timeout 180 "$build/tests/nccl/nccl_harness" \
      --plugin "$build/nccl/libnccl-net-rdmad.so" --abi 10 --rank $r --nranks 4 --dir "$dir/nccl" \
      allreduce --ring 0,2,1,3 --elements 65536 --iterations 2 >/tmp/nccl-$r.out 2>&1 &
    pids+=($!)
  done
  for r in 0 1; do
    out=/tmp/nccl-$((first + r)).out
    if ! wait "${pids[$r]}" || ! grep -q 'allreduce done' "$out"; then
      say "nccl rank $((first + r)) failed"
      cat "$out"
      return 1
    fi
  done
  say "nccl ring AllReduce and AllGather over rxe: ranks $first and $((first + 1)) exact"
}
# Flow bytes this daemon sent over both rails (the ring's hops from this guest's ranks).
flow_bytes() { curl -s "$metrics_url" | awk '/^rdmad_balancer_bytes_sent_total\{/ { s += $NF } END { printf "%.0f\n", s }'; }
sent_before=$(flow_bytes)
check nccl_ranks
sent_after=$(flow_bytes)
say "the ranks' flows sent $((sent_after - sent_before)) bytes over rxe0 and rxe1"
check test "$sent_after" -gt "$sent_before"
# The ranks' receives completed on the rxe lanes, not only through the control channel: their sends
# of one chunk as RDMA WRITEs with immediate (peer protocol 7; the receive's length from the
# immediate's completion, so a wrong byte_len fails the ranks' checks above). Send-dones as SENDs
# on the lanes (sends of several chunks) are checked on soft NICs (flow_transfer_test).
check metric_at_least rdmad_flow_send_dones_total 'path="immediate"' 1
# The ranks' receives were advertised on the rxe lanes too, as lane mail (peer protocol 8): a
# kernel verbs SEND of the recv post into one of the receives the peer keeps posted there.
check metric_at_least rdmad_flow_recv_posts_total 'path="lane"' 1

# The operator's view: both rxe devices, their state and counters.
nics=$("$build/tools/rdmactl/rdmactl" --socket "$socket" nics)
echo "$nics"
check grep -q 'rail0 .*rdma_core' <<<"$nics"
check grep -q 'rxe1' <<<"$nics"
check metric_at_least rdmad_nic_info 'device="rxe0"' 1
check metric_at_least rdmad_nic_info 'device="rxe1"' 1
check metric_at_least rdmad_hw_counter_total 'counter="rcvd_pkts"' 1
curl -s "$metrics_url" | grep -E '^rdmad_(nic_info|hw_counter_total|balancer_bytes_sent_total|balancer_failovers_total|peer_rebuilds_total)' | head -40

# What the daemon saw (shown with --verbose): port events, failovers, rebuilds.
grep -E "\[(verbs|flow|peer)\].*(port|failed|rebuil|moved|gid|qps)" "$run_dir/rdmad.log" | grep -v "peer redial" | tail -n 30

# Stay up until the other guest is done with this daemon too.
touch "$dir/finished-$guest"
check wait_until 120 test -e "$dir/finished-$((1 - guest))"
check stop_daemon
say "passed"
