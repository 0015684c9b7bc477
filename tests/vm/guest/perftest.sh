#!/bin/bash
# perftest as the reference for rdmad's verbs (issue 19, item 7), two guests: ib_write_bw and
# ib_send_lat between the guests' rxe0 devices (rail 0), then rdmad's verbs over the same devices
# at the same sizes (bench/verbs/pair_bench.cc: the rdma_core backend behind the verbs interface,
# measured the way perftest measures). Guest 1 serves, guest 0 runs the clients and prints each
# pair of figures and their ratio. Nothing is asserted about speed (TCG); every run must complete.
# Args: GUEST BUILD_DIR
guest=$1
build=$2
bench=$build/bench/verbs/verbs_pair_bench
server=10.1.0.2  # guest 1's rail 0
[ -x "$bench" ] || { echo "perftest: $bench is not built"; exit 1; }

source "$(dirname "$0")/perftest_lib.sh"
# The RoCE v2 GID of this guest's IPv4 address on rxe0 (perftest's -x; rdmad selects it itself).
gid=$(roce_v2_gid rxe0)
[ -n "$gid" ] || { echo "perftest: no RoCE v2 GID of an IPv4 address on rxe0"; exit 1; }

# "kind size iterations" of each measurement: small, so the run stays short under TCG. Each is
# measured `rounds` times, perftest and rdmad alternating (a TCG guest's speed drifts from one
# second to the next), and the medians compared.
cases=("write 4096 400" "write 65536 100" "lat 64 200" "lat 4096 100")
rounds=3
# The exact commands (BENCHMARKS.md records them). perftest's client adds the server's address;
# -I 0: no inline data, which the verbs interface does not have.
perftest_cmd() {
  case $1 in
    write) echo ib_write_bw -d rxe0 -x "$gid" -s "$2" -n "$3" --report_gbits -F ;;
    lat) echo ib_send_lat -d rxe0 -x "$gid" -s "$2" -n "$3" -e -I 0 -F ;;
  esac
}
rdmad_cmd() {  # kind size iterations server|client address
  case $1 in
    write) echo "$bench" "$4" "$5" --device rxe0 --test write_bw --size "$2" --iters "$3" ;;
    lat) echo "$bench" "$4" "$5" --device rxe0 --test send_lat --size "$2" --iters "$3" --events ;;
  esac
}

# perftest is the reference, not the subject: a run of it that fails (ib_send_lat -e has hung on
# rxe under TCG, both sides waiting until their timeout) leaves that round without a perftest
# figure, said on the console. The test fails when any of rdmad's runs fails, or when perftest gave
# no figure at all for a case. A run takes seconds; a hung one is given up after 30 s (the client)
# or 40 s (the server, which starts first).
if [ "$guest" -ne 0 ]; then  # the server side: each run waits for its client
  status=0
  serve() {  # reference|subject CMD...
    local role=$1
    shift
    timeout 40 "$@" >/tmp/out 2>&1 && return 0
    echo "perftest: server $* failed"
    cat /tmp/out
    [ "$role" = reference ] || status=1
  }
  for ((r = 0; r < rounds; r++)); do
    for c in "${cases[@]}"; do
      serve reference $(perftest_cmd $c)
      serve subject $(rdmad_cmd $c server 0.0.0.0)
    done
  done
  exit $status
fi

PERFTEST_TIMEOUT=30
median() { tr ' ' '\n' | grep . | sort -g | awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)]; else print "?" }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }'; }
# Where each figure is: perftest's result line (bytes, iterations, ...: BW average / t_typical),
# verbs_pair_bench's line.
declare -A perftest_column=([write]=4 [lat]=5)
declare -A rdmad_pattern=([write]='s/.*: \([0-9.]*\) Gb\/s.*/\1/p' [lat]='s/.*p50 \([0-9.]*\) us.*/\1/p')
declare -A title=([write]="WRITE %s B x %s, Gb/s (ib_write_bw, rdmad)" [lat]="SEND %s B x %s, one-way p50 us (ib_send_lat -e, rdmad --events)")

# (no process substitution here: the guest has no /dev/fd)
status=0
declare -A ref ours
for ((r = 0; r < rounds; r++)); do
  for c in "${cases[@]}"; do
    read -r kind size iters <<<"$c"
    out=$(perftest_client "$server" $(perftest_cmd $c)) ||
      echo "perftest: $(perftest_cmd $c) failed: no perftest figure in round $((r + 1))"
    ref[$c]+=" $(awk -v s="$size" -v n="$iters" -v k="${perftest_column[$kind]}" '$1 == s && $2 == n { print $k }' <<<"$out")"
    out=$(timeout 90 $(rdmad_cmd $c client "$server")) || { echo "perftest: $(rdmad_cmd $c client $server) failed"; status=1; }
    ours[$c]+=" $(sed -n "${rdmad_pattern[$kind]}" <<<"$out")"
  done
done
for c in "${cases[@]}"; do
  read -r kind size iters <<<"$c"
  [ -n "${ref[$c]// /}" ] || { echo "perftest: no run of the reference completed for: $c"; status=1; }
  a=$(median <<<"${ref[$c]}")
  b=$(median <<<"${ours[$c]}")
  # shellcheck disable=SC2059
  echo "report: $(printf "${title[$kind]}" "$size" "$iters"):${ref[$c]} /${ours[$c]}; medians $a, $b: rdmad/perftest $(ratio "$b" "$a")"
done
for kind in write lat; do
  echo "report: server: $(perftest_cmd $kind SIZE N); client: the same + $server"
  echo "report: server: $(rdmad_cmd $kind SIZE N server 0.0.0.0); client: the same with client $server"
done
exit $status
