/* Registers 2 MiB of GPU memory with rdmad (dma-buf export through the CUDA driver) and prints its
 * keys. Exits 0 with a message when CUDA or a GPU is missing. The example loads CUDA at run time
 * only to allocate device memory; librdmad loads it by itself for the export.
 * Usage: register_gpu [SOCKET_PATH] */
#include <dlfcn.h>
#include <rdmad/rdmad.h>
#include <stdio.h>

typedef int (*cu_init_fn)(unsigned);
typedef int (*cu_device_get_count_fn)(int*);
typedef int (*cu_primary_ctx_retain_fn)(void**, int);
typedef int (*cu_ctx_set_current_fn)(void*);
typedef int (*cu_mem_alloc_fn)(unsigned long long*, size_t);
typedef int (*cu_mem_free_fn)(unsigned long long);

int main(int argc, char** argv) {
  void* cuda = dlopen("libcuda.so.1", RTLD_NOW);
  if (cuda == NULL) {
    printf("skipping: CUDA driver not available (%s)\n", dlerror());
    return 0;
  }
  /* POSIX's way to turn dlsym's object pointer into a function pointer under -pedantic. */
  cu_init_fn cu_init;
  cu_device_get_count_fn cu_count;
  cu_primary_ctx_retain_fn cu_retain;
  cu_ctx_set_current_fn cu_set;
  cu_mem_alloc_fn cu_alloc;
  cu_mem_free_fn cu_free;
  *(void**)(&cu_init) = dlsym(cuda, "cuInit");
  *(void**)(&cu_count) = dlsym(cuda, "cuDeviceGetCount");
  *(void**)(&cu_retain) = dlsym(cuda, "cuDevicePrimaryCtxRetain");
  *(void**)(&cu_set) = dlsym(cuda, "cuCtxSetCurrent");
  *(void**)(&cu_alloc) = dlsym(cuda, "cuMemAlloc_v2");
  *(void**)(&cu_free) = dlsym(cuda, "cuMemFree_v2");
  int count = 0;
  if (!cu_init || !cu_count || !cu_retain || !cu_set || !cu_alloc || !cu_free || cu_init(0) != 0 ||
      cu_count(&count) != 0 || count == 0) {
    printf("skipping: no usable GPU\n");
    return 0;
  }
  void* ctx = NULL;
  unsigned long long dptr = 0;
  const size_t bytes = 2u << 20;
  if (cu_retain(&ctx, 0) != 0 || cu_set(ctx) != 0 || cu_alloc(&dptr, bytes) != 0) {
    fprintf(stderr, "cannot allocate GPU memory\n");
    return 1;
  }
  rdmad_client* client = NULL;
  rdmad_status s = rdmad_connect(argc > 1 ? argv[1] : NULL, &client);
  if (s != RDMAD_OK) {
    fprintf(stderr, "connect: %s: %s\n", rdmad_strerror(s), rdmad_last_error(NULL));
    return 1;
  }
  rdmad_mr* mr = NULL;
  s = rdmad_register_gpu(client, dptr, bytes, RDMAD_ACCESS_LOCAL_WRITE | RDMAD_ACCESS_REMOTE_WRITE, 0, &mr);
  int rc = 0;
  if (s != RDMAD_OK) {
    /* On the soft backend or without the open kernel module this names the reason. */
    printf("register_gpu: %s: %s\n", rdmad_strerror(s), rdmad_last_error(client));
    rc = s == RDMAD_ERR_NOT_SUPPORTED ? 0 : 1;
  } else {
    printf("handle %llu iova 0x%llx nics %zu\n", (unsigned long long)rdmad_mr_handle(mr),
           (unsigned long long)rdmad_mr_iova(mr), rdmad_mr_nic_count(mr));
    rc = rdmad_deregister(client, mr) == RDMAD_OK ? 0 : 1;
  }
  rdmad_disconnect(client);
  cu_free(dptr);
  return rc;
}
