/* Registers 1 MiB of host memory with rdmad and prints its keys.
 * Usage: register_host [SOCKET_PATH]   (default: $RDMAD_SOCKET or /run/rdmad/rdmad.sock) */
#include <rdmad/rdmad.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char** argv) {
  rdmad_client* client = NULL;
  rdmad_status s = rdmad_connect(argc > 1 ? argv[1] : NULL, &client);
  if (s != RDMAD_OK) {
    fprintf(stderr, "connect: %s: %s\n", rdmad_strerror(s), rdmad_last_error(NULL));
    return 1;
  }
  rdmad_host_buffer buf;
  s = rdmad_alloc_host(1 << 20, &buf);
  if (s != RDMAD_OK) {
    fprintf(stderr, "alloc: %s\n", rdmad_strerror(s));
    rdmad_disconnect(client);
    return 1;
  }
  memset(buf.addr, 0x5a, buf.length);
  rdmad_mr* mr = NULL;
  s = rdmad_register_host(client, buf.fd, 0, buf.length,
                          RDMAD_ACCESS_LOCAL_WRITE | RDMAD_ACCESS_REMOTE_WRITE | RDMAD_ACCESS_REMOTE_READ, 0,
                          &mr);
  if (s != RDMAD_OK) {
    fprintf(stderr, "register: %s: %s\n", rdmad_strerror(s), rdmad_last_error(client));
    rdmad_free_host(&buf);
    rdmad_disconnect(client);
    return 1;
  }
  printf("handle %llu iova 0x%llx length %llu\n", (unsigned long long)rdmad_mr_handle(mr),
         (unsigned long long)rdmad_mr_iova(mr), (unsigned long long)rdmad_mr_length(mr));
  for (size_t i = 0; i < rdmad_mr_nic_count(mr); ++i) {
    rdmad_nic_key key;
    rdmad_mr_key(mr, i, &key);
    printf("nic %u lkey 0x%x rkey 0x%x\n", key.nic_index, key.lkey, key.rkey);
  }
  s = rdmad_deregister(client, mr);
  rdmad_free_host(&buf);
  rdmad_disconnect(client);
  return s == RDMAD_OK ? 0 : 1;
}
