#include "rdmad/daemon/clients/fd_budget.h"

#include <sys/resource.h>

namespace rdmad::clients {

uint64_t FdBudget::raise_fd_limit() {
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) != 0) return 1024;
  if (lim.rlim_cur < lim.rlim_max) {
    rlimit up = lim;
    up.rlim_cur = lim.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &up) == 0) lim = up;
  }
  return lim.rlim_cur == RLIM_INFINITY ? uint64_t{1} << 20 : static_cast<uint64_t>(lim.rlim_cur);
}

}  // namespace rdmad::clients
