/* A local client that fills its flow's ring with requests the daemon must refuse: a zero-length
 * receive, ranges outside its registration, offsets that wrap, handles it does not own. Run as
 * another user (argv: socket peer uid seconds). It checks that every request completes with an
 * error and prints "abuser: N bad requests, all refused"; exit 1 otherwise. Public API only. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "other_user.h"

int main(int argc, char** argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: ring_abuser SOCKET PEER UID SECONDS\n");
    return 2;
  }
  rdmad_client* c = connect_as(argv[1], (uid_t)atoi(argv[3]));
  if (c == NULL) return 2;
  rdmad_host_buffer buf;
  rdmad_mr* mr = NULL;
  const uint64_t bytes = 1 << 16;
  if (rdmad_alloc_host(bytes, &buf) != RDMAD_OK ||
      rdmad_register_host(c, buf.fd, 0, bytes,
                          RDMAD_ACCESS_LOCAL_WRITE | RDMAD_ACCESS_REMOTE_WRITE | RDMAD_ACCESS_REMOTE_READ, 0,
                          &mr) != RDMAD_OK) {
    fprintf(stderr, "register: %s\n", rdmad_last_error(c));
    return 2;
  }
  rdmad_flow* flow = NULL;
  if (rdmad_flow_open(c, argv[2], NULL, &flow) != RDMAD_OK || rdmad_flow_wait_connected(flow, 10000) != RDMAD_OK) {
    fprintf(stderr, "flow: %s\n", rdmad_last_error(c));
    return 2;
  }
  const rdmad_remote nobody = {0x7777, 1 << 20, RDMAD_ACCESS_REMOTE_WRITE | RDMAD_ACCESS_REMOTE_READ};
  const double end = now_s() + atof(argv[4]);
  uint64_t posted = 0, refused = 0, accepted = 0;
  while (now_s() < end) {
    rdmad_status st[6];
    st[0] = rdmad_flow_recv(flow, 1, mr, 0, 0);                      /* zero-length receive */
    st[1] = rdmad_flow_recv(flow, 2, mr, bytes - 8, 64);             /* past the registration */
    st[2] = rdmad_flow_write(flow, 3, mr, 0, &nobody, 0, 4096);      /* a remote it never imported */
    st[3] = rdmad_flow_write(flow, 4, mr, UINT64_MAX - 10, &nobody, 0, 100); /* offset that wraps */
    st[4] = rdmad_flow_send(flow, 5, mr, 0, bytes + 1);              /* longer than the registration */
    st[5] = rdmad_flow_read(flow, 6, mr, 8, &nobody, UINT64_MAX, 16); /* remote offset that wraps */
    int n = 0;
    for (int i = 0; i < 6; ++i) n += st[i] == RDMAD_OK;
    posted += (uint64_t)n;
    int got = 0;
    const double deadline = now_s() + 10;
    while (got < n && now_s() < deadline) {
      rdmad_completion done[8];
      size_t k = rdmad_flow_poll(flow, done, 8);
      for (size_t i = 0; i < k; ++i) {
        if (done[i].status == RDMAD_OK) ++accepted;
        else ++refused;
      }
      got += (int)k;
      if (k == 0) rdmad_flow_wait(flow, 100);
    }
    if (got < n) {
      fprintf(stderr, "abuser: %d of %d bad requests never completed\n", n - got, n);
      return 1;
    }
  }
  printf("abuser: %llu bad requests, %llu refused, %llu accepted\n", (unsigned long long)posted,
         (unsigned long long)refused, (unsigned long long)accepted);
  fflush(stdout);
  rdmad_flow_close(flow);
  rdmad_deregister(c, mr);
  rdmad_disconnect(c);
  return accepted == 0 && posted > 0 ? 0 : 1;
}
