/* Another local user on a two-sided channel it was not given: as UID, opens a flow to PEER on
 * CHANNEL and posts one send (64 bytes of 'X') or one receive (4 KiB), prints "posted", then
 * "completed status=S length=L first=HH" when it completes, or "pending" after SECONDS.
 * argv: SOCKET PEER UID CHANNEL send|recv SECONDS. Public API only. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "other_user.h"

int main(int argc, char** argv) {
  if (argc != 7 || (strcmp(argv[5], "send") != 0 && strcmp(argv[5], "recv") != 0)) {
    fprintf(stderr, "usage: channel_intruder SOCKET PEER UID CHANNEL send|recv SECONDS\n");
    return 2;
  }
  const int send = strcmp(argv[5], "send") == 0;
  rdmad_client* c = connect_as(argv[1], (uid_t)atoi(argv[3]));
  if (c == NULL) return 2;
  rdmad_host_buffer buf;
  rdmad_mr* mr = NULL;
  const uint64_t bytes = 4096;
  if (rdmad_alloc_host(bytes, &buf) != RDMAD_OK) {
    fprintf(stderr, "alloc: %s\n", rdmad_last_error(c));
    return 2;
  }
  memset(buf.addr, send ? 'X' : 0, bytes);
  if (rdmad_register_host(c, buf.fd, 0, bytes, RDMAD_ACCESS_LOCAL_WRITE | RDMAD_ACCESS_REMOTE_WRITE, 0, &mr) !=
      RDMAD_OK) {
    fprintf(stderr, "register: %s\n", rdmad_last_error(c));
    return 2;
  }
  rdmad_flow_attr attr = {strtoull(argv[4], NULL, 0), 0, 0};
  rdmad_flow* flow = NULL;
  if (rdmad_flow_open(c, argv[2], &attr, &flow) != RDMAD_OK || rdmad_flow_wait_connected(flow, 10000) != RDMAD_OK) {
    fprintf(stderr, "flow: %s\n", rdmad_last_error(c));
    return 2;
  }
  const rdmad_status st = send ? rdmad_flow_send(flow, 1, mr, 0, 64) : rdmad_flow_recv(flow, 1, mr, 0, bytes);
  if (st != RDMAD_OK) {
    fprintf(stderr, "post: %d %s\n", (int)st, rdmad_last_error(c));
    return 2;
  }
  printf("posted\n");
  fflush(stdout);
  const double end = now_s() + atof(argv[6]);
  while (now_s() < end) {
    rdmad_completion done;
    if (rdmad_flow_poll(flow, &done, 1) == 1) {
      printf("completed status=%d length=%llu first=%02x\n", (int)done.status, (unsigned long long)done.length,
             ((const unsigned char*)buf.addr)[0]);
      fflush(stdout);
      return 0;
    }
    rdmad_flow_wait(flow, 100);
  }
  printf("pending\n");
  fflush(stdout);
  return 0;
}
