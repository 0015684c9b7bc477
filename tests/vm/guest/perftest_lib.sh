# perftest helpers for the guest scripts (sourced).

# roce_v2_gid DEV: the index of DEV's RoCE v2 GID of an IPv4 address (::ffff:a.b.c.d), perftest's -x
# (rdmad selects it itself). Empty when there is none.
roce_v2_gid() {
  local f i
  for f in /sys/class/infiniband/"$1"/ports/1/gids/*; do
    i=${f##*/}
    case $(cat "$f") in
      0000:0000:0000:0000:0000:ffff:*)
        if [ "$(cat "/sys/class/infiniband/$1/ports/1/gid_attrs/types/$i" 2>/dev/null)" = "RoCE v2" ]; then
          echo "$i"
          return 0
        fi ;;
    esac
  done
  return 1
}

# perftest_client SERVER CMD...: perftest's client gives up at once when its server is not listening
# yet: try again for 60 s. Each attempt is given up after $PERFTEST_TIMEOUT s (90). Prints the
# client's output.
perftest_client() {
  local server=$1 deadline=$((SECONDS + 60)) out
  shift
  while true; do
    out=$(timeout "${PERFTEST_TIMEOUT:-90}" "$@" "$server" 2>&1) && { echo "$out"; return 0; }
    if ! grep -q "Couldn't connect" <<<"$out" || [ $SECONDS -ge $deadline ]; then
      echo "$out" >&2
      return 1
    fi
    sleep 0.05
  done
}
