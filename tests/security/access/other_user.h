/* What the attacking local clients share: they run as another user and keep time. C, public API. */
#pragma once
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "rdmad/rdmad.h"

static inline double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Becomes `uid` (and the group of that number), then connects to the daemon's client socket; NULL
 * after saying why on stderr. */
static inline rdmad_client* connect_as(const char* socket_path, uid_t uid) {
  if (setgid(uid) != 0 || setuid(uid) != 0) {
    perror("setuid");
    return NULL;
  }
  rdmad_client* c = NULL;
  if (rdmad_connect(socket_path, &c) != RDMAD_OK) {
    fprintf(stderr, "connect: %s\n", rdmad_last_error(NULL));
    return NULL;
  }
  return c;
}
