#!/bin/bash
# The rdma_core instances of the backend-parameterised verbs tests, and the hardware suites, on
# rxe (guest 0, two rails: rxe0 and rxe1). Args: GUEST BUILD_DIR
build=$2
status=0
run() {
  echo "== $*"
  "$@" || status=1
}
# Parameter index 1 is rdma_core in the error and state tests; the transfer test names its instances.
run "$build/tests/unit/verbs/verbs_transfer_test" --gtest_filter='*rdma_core*' --gtest_brief=1
run "$build/tests/unit/verbs/verbs_error_test" --gtest_filter='Verbs/*/1' --gtest_brief=1
run "$build/tests/unit/verbs/verbs_state_test" --gtest_filter='Verbs/*/1' --gtest_brief=1
run "$build/tests/unit/verbs/verbs_rdma_core_caps_test" --gtest_brief=1
run "$build/tests/hw/rdma_core_hw_test" --gtest_brief=1
run "$build/tests/hw/rdma_core_adapter_hw_test" --gtest_brief=1
exit $status
