#!/bin/bash
# Every test that needs an RDMA device, on rxe (guest 0, two rails: rxe0 and rxe1): the rdma_core
# instances of the backend-parameterised verbs tests, the device half of the capability test and
# the hardware suites. BUILD_DIR/tests/device_tests.txt (written by CMake: tests/CMakeLists.txt,
# DEVICE_TESTS) lists each binary with its gtest filter; these are the tests the host's ctest does
# not register. A skipped test fails the run: on rxe every one of them must run.
# Args: GUEST BUILD_DIR
build=$2
list="$build/tests/device_tests.txt"
[ -s "$list" ] || { echo "verbs_rdma_core: $list is missing or empty (configure the build first)"; exit 1; }
status=0
total=0
while read -r line; do
  [ -n "$line" ] || continue
  bin=${line% *}
  filter=${line##* }
  name=${bin##*/}
  if [ ! -x "$bin" ]; then
    echo "== $name: not built ($bin)"
    status=1
    continue
  fi
  start=${EPOCHREALTIME/./}
  out=$("$bin" --gtest_filter="$filter" --gtest_brief=1 2>&1)
  rc=$?
  ms=$(((${EPOCHREALTIME/./} - start) / 1000))
  ran=$(sed -n 's/^\[==========\] \([0-9]*\) tests\{0,1\} from .* ran\..*/\1/p' <<<"$out")
  skipped=$(sed -n 's/^\[  SKIPPED \] \([0-9]*\) tests\{0,1\}, listed below:/\1/p' <<<"$out")
  printf 'report: %s (%s): %s tests, %s skipped, exit %d, %d.%03d s\n' "$name" "$filter" "${ran:-0}" "${skipped:-0}" "$rc" \
    $((ms / 1000)) $((ms % 1000))
  if [ "$rc" -ne 0 ] || [ -n "$skipped" ] || [ "${ran:-0}" -eq 0 ]; then
    echo "$out"
    status=1
  fi
  total=$((total + ${ran:-0}))
done <"$list"
if [ $status -eq 0 ]; then
  echo "report: $total device tests ran on rxe: all passed, none skipped"
else
  echo "verbs_rdma_core: $total device tests ran on rxe, some failed or skipped (above)"
fi
exit $status
