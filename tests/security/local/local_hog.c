/* A local user that takes all it can get from the daemon: many connections, flows to a node that
 * does not exist, registrations until refused. Run as another user (argv: SOCKET UID CONNECTIONS
 * FLOWS REGISTRATIONS); prints what it got and then holds it until it is killed. Public API only. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <unistd.h>

#include "rdmad/rdmad.h"

int main(int argc, char** argv) {
  if (argc != 6) {
    fprintf(stderr, "usage: local_hog SOCKET UID CONNECTIONS FLOWS REGISTRATIONS\n");
    return 2;
  }
  const uid_t uid = (uid_t)atoi(argv[2]);
  struct rlimit lim;
  getrlimit(RLIMIT_NOFILE, &lim);
  lim.rlim_cur = lim.rlim_max;
  setrlimit(RLIMIT_NOFILE, &lim);
  if (setgid(uid) != 0 || setuid(uid) != 0) {
    perror("setuid");
    return 2;
  }
  const int want_conns = atoi(argv[3]), want_flows = atoi(argv[4]), want_regs = atoi(argv[5]);
  rdmad_client** clients = calloc((size_t)want_conns, sizeof *clients);
  int conns = 0, conns_refused = 0;
  for (int i = 0; i < want_conns; ++i) {
    if (rdmad_connect(argv[1], &clients[conns]) == RDMAD_OK) ++conns;
    else ++conns_refused;
  }
  if (conns == 0) {
    fprintf(stderr, "hog: no connection at all: %s\n", rdmad_last_error(NULL));
    return 1;
  }
  int flows = 0, flows_refused = 0;
  for (int i = 0; i < want_flows; ++i) {
    rdmad_flow* f = NULL;
    /* Spread over connections: max_flows_per_client would stop one connection early. */
    if (rdmad_flow_open(clients[i % conns], "ghost", NULL, &f) == RDMAD_OK) ++flows;
    else ++flows_refused;
  }
  rdmad_host_buffer buf;
  if (rdmad_alloc_host(4096 * 64, &buf) != RDMAD_OK) return 2;
  int regs = 0, regs_refused = 0;
  for (int i = 0; i < want_regs; ++i) {
    rdmad_mr* mr = NULL;
    /* Distinct ranges (identical ones are shared, not new registrations). */
    if (rdmad_register_host(clients[0], buf.fd, (uint64_t)(i % 64) * 4096, 4096 - (uint64_t)(i / 64), RDMAD_ACCESS_LOCAL_WRITE, 0,
                            &mr) == RDMAD_OK)
      ++regs;
    else
      ++regs_refused;
  }
  printf("hog: connections %d refused %d, flows %d refused %d, registrations %d refused %d\n", conns, conns_refused,
         flows, flows_refused, regs, regs_refused);
  fflush(stdout);
  for (;;) pause(); /* hold everything until killed */
}
