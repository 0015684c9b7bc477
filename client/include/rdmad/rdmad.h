/* librdmad: register host and GPU memory with the local rdmad daemon.
 *
 * C11 API. Every function returns an rdmad_status; on failure rdmad_last_error() gives the
 * daemon's or the library's explanation. An rdmad_client is safe to use from several threads
 * (calls are serialized); rdmad_mr objects belong to the client that created them. */
#ifndef RDMAD_RDMAD_H
#define RDMAD_RDMAD_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* librdmad.so is built with hidden visibility; everything declared here is its ABI. */
#if defined(__GNUC__)
#pragma GCC visibility push(default)
#endif

/* Status codes. The numeric values travel on the wire (docs/protocol.md): never renumber. */
typedef enum rdmad_status {
  RDMAD_OK = 0,
  RDMAD_ERR_INVALID_ARGUMENT = 1, /* bad range, flags, handle format, ... */
  RDMAD_ERR_PERMISSION = 2,       /* uid not allowed, or handle owned by another connection */
  RDMAD_ERR_QUOTA = 3,            /* per-uid pinned-bytes or registration-count quota exceeded */
  RDMAD_ERR_NOT_SUPPORTED = 4,    /* backend, driver or hardware cannot do this */
  RDMAD_ERR_NOT_FOUND = 5,        /* unknown handle */
  RDMAD_ERR_PROTOCOL = 6,         /* malformed or unexpected message */
  RDMAD_ERR_CONNECTION = 7,       /* daemon unreachable or connection lost */
  RDMAD_ERR_VERSION = 8,          /* no common protocol version */
  RDMAD_ERR_NO_RESOURCE = 9,      /* daemon or backend out of a resource; retry later */
  RDMAD_ERR_SYSTEM = 10,          /* a system call failed (message names it) */
  RDMAD_ERR_CUDA = 11,            /* CUDA driver missing or a CUDA call failed */
  RDMAD_ERR_LOST = 12,            /* registration lost when the daemon restarted */
  RDMAD_ERR_PEER = 13,            /* the peer node is not connected, or was lost mid-transfer */
  RDMAD_ERR_REMOTE_ACCESS = 14,   /* the peer refused the access (rights, bounds, revoked export) */
  RDMAD_ERR_DAEMON_GONE = 15,     /* the daemon stopped or died with this request in flight (a call, or a
                                   * flow request: the library completes those itself); reconnect */
  RDMAD_ERR_ADMIN_SOCKET = 16     /* an operator's request sent on the client socket: it is served on the
                                   * admin socket only ([ipc] admin_socket_path; the message names it) */
} rdmad_status;

/* Access flags (same meaning as the IBV_ACCESS_* flags of the same name). */
enum {
  RDMAD_ACCESS_LOCAL_WRITE = 1u << 0,
  RDMAD_ACCESS_REMOTE_WRITE = 1u << 1, /* requires LOCAL_WRITE */
  RDMAD_ACCESS_REMOTE_READ = 1u << 2,
  RDMAD_ACCESS_REMOTE_ATOMIC = 1u << 3, /* requires LOCAL_WRITE */
  RDMAD_ACCESS_RELAXED_ORDERING = 1u << 4,
  RDMAD_ACCESS_ALL = (1u << 5) - 1
};

enum { RDMAD_MAX_NICS = 16 };

typedef struct rdmad_client rdmad_client; /* one connection to the daemon */
typedef struct rdmad_mr rdmad_mr;         /* one registration */

typedef enum rdmad_link_state {
  RDMAD_LINK_UNKNOWN = 0,
  RDMAD_LINK_DOWN = 1,
  RDMAD_LINK_UP = 2
} rdmad_link_state;

typedef struct rdmad_nic_info {
  uint32_t index; /* position in the daemon's NIC list; bit `index` of nic_mask selects it */
  char name[32];
  char backend[16];
  char pci_address[16]; /* "0000:17:00.0", empty for software NICs */
  rdmad_link_state link_state;
  uint32_t speed_mbps;
  int32_t numa_node; /* -1 when unknown */
} rdmad_nic_info;

/* A registration's keys on one NIC. They carry local access only: no peer can use them, whatever
 * the registration's access flags say (those are what it may be exported with). Peers reach
 * memory only through rdmad_export, which makes keys of its own for exactly the exported range. */
typedef struct rdmad_nic_key {
  uint32_t nic_index;
  uint32_t lkey;
  uint32_t rkey;
} rdmad_nic_key;

typedef enum rdmad_mem_kind { RDMAD_MEM_HOST = 1, RDMAD_MEM_GPU = 2 } rdmad_mem_kind;

/* Where a buffer lives, for rdmad_nearest_nics(). */
typedef struct rdmad_location {
  rdmad_mem_kind kind;
  int32_t numa_node;    /* host memory: NUMA node, -1 unknown */
  char pci_address[16]; /* GPU memory: the GPU's PCI address */
} rdmad_location;

typedef struct rdmad_registration_info {
  uint64_t handle;
  uint64_t offset;
  uint64_t length;
  rdmad_mem_kind kind;
  uint32_t access;
} rdmad_registration_info;

/* Host buffer from rdmad_alloc_host(): a sealed memfd mapped into the caller. */
typedef struct rdmad_host_buffer {
  void* addr;
  size_t length;
  int fd;
} rdmad_host_buffer;

/* Called once per registration lost when the library reconnected after a daemon restart (a
 * daemon that kept the client's session gives it back instead: the registrations stay, with their
 * handles; docs/operations.md, "Restarts that keep registrations"). The rdmad_mr stays valid
 * (rdmad_mr_is_lost() returns 1) until the caller deregisters it. */
typedef void (*rdmad_lost_fn)(void* user, rdmad_mr* mr, uint64_t old_handle);

/* Returns a static description of a status code. */
const char* rdmad_strerror(rdmad_status status);

/* How long rdmad_connect waits for the daemon to accept the connection and answer hello. */
enum { RDMAD_DEFAULT_CONNECT_TIMEOUT_MS = 2000 };

/* Connects and negotiates the protocol version within RDMAD_DEFAULT_CONNECT_TIMEOUT_MS, or
 * $RDMAD_CONNECT_TIMEOUT_MS when set (1..600000; a socket-activated daemon's first start on a
 * loaded node may take longer than the default). socket_path NULL: $RDMAD_SOCKET or
 * /run/rdmad/rdmad.sock. A stopped daemon is
 * RDMAD_ERR_CONNECTION: at once when its socket file is missing or left behind, at the timeout when
 * nobody accepts or answers (a socket still held open, a hung daemon). RDMAD_ERR_PERMISSION: the
 * daemon may be running but this user may not use it (the socket's mode or group denies the
 * connect, or the daemon's allow-lists refuse the uid); rdmad_last_error(NULL) says which. */
rdmad_status rdmad_connect(const char* socket_path, rdmad_client** out);

/* rdmad_connect with a timeout of timeout_ms (at least 1) instead of the default; the client
 * keeps it as the bound of each connection attempt when it reconnects. */
rdmad_status rdmad_connect_timeout(const char* socket_path, uint32_t timeout_ms, rdmad_client** out);

/* Closes the connection (the daemon releases every registration of it) and frees every
 * rdmad_mr of the client except lost ones. NULL is a no-op. Close the client's flows first: each
 * holds the connection open until rdmad_flow_close (that is how it notices a daemon gone). */
void rdmad_disconnect(rdmad_client* client);

/* The detailed message of the last failure on `client` (NULL: of this thread's last failed
 * rdmad_connect). Valid until the next call on the client. */
const char* rdmad_last_error(const rdmad_client* client);

/* Negotiated protocol version. */
uint16_t rdmad_protocol_version(const rdmad_client* client);

/* Installs the callback reporting registrations lost across a daemon restart. */
void rdmad_set_lost_callback(rdmad_client* client, rdmad_lost_fn fn, void* user);

/* How long a call waits for the daemon to come back when it finds the connection gone before its
 * request left (default 5000 ms; 0 disables reconnecting). A request already sent when the
 * connection drops is not waited for: it fails with RDMAD_ERR_DAEMON_GONE after one connection
 * attempt of at most 500 ms finds no daemon, or another instance; only when the same instance
 * answers (it closed just this connection, with the request unread) is it sent again. */
void rdmad_set_reconnect_timeout_ms(rdmad_client* client, uint32_t timeout_ms);

/* Lists the node's NICs. Writes at most `capacity` entries and the total into *count. */
rdmad_status rdmad_query_nics(rdmad_client* client, rdmad_nic_info* out, size_t capacity, size_t* count);

/* Lists the NICs nearest (PCI tree / NUMA node) to a buffer at `where`, nearest first. */
rdmad_status rdmad_nearest_nics(rdmad_client* client, const rdmad_location* where, rdmad_nic_info* out,
                                size_t capacity, size_t* count);

/* Fills *where for host memory at addr (its NUMA node, when the kernel tells). */
rdmad_status rdmad_locate_host(const void* addr, rdmad_location* where);

/* Fills *where for a CUDA device pointer (the GPU's PCI address). */
rdmad_status rdmad_locate_gpu(uint64_t device_ptr, rdmad_location* where);

/* Allocates `length` bytes (rounded up to the page size) of shareable host memory: a memfd
 * sealed against shrinking, mapped read-write, its pages allocated now (charged to the caller,
 * like a pinned-memory allocator; on the soft backend the daemon maps the pages a memfd holds when
 * it registers a range of 1 MiB or more, so a large memfd of your own should be written or
 * populated before registering). Free with
 * rdmad_free_host(). */
rdmad_status rdmad_alloc_host(size_t length, rdmad_host_buffer* out);

/* Unmaps and closes a buffer from rdmad_alloc_host(). Registrations of it stay valid. */
void rdmad_free_host(rdmad_host_buffer* buffer);

/* Registers [offset, offset+length) of memfd `fd` (sealed with F_SEAL_SHRINK) on the NICs in
 * nic_mask (0: all). Repeating an identical registration returns the same rdmad_mr with a
 * reference added; each must be released with rdmad_deregister(). */
rdmad_status rdmad_register_host(rdmad_client* client, int fd, uint64_t offset, uint64_t length,
                                 uint32_t access, uint32_t nic_mask, rdmad_mr** out);

/* Registers CUDA device memory [device_ptr, device_ptr+length): exports a dma-buf through the
 * CUDA driver (loaded at run time) and hands it to the daemon. */
rdmad_status rdmad_register_gpu(rdmad_client* client, uint64_t device_ptr, uint64_t length, uint32_t access,
                                uint32_t nic_mask, rdmad_mr** out);

/* Drops one reference; the last one deregisters in the daemon and frees `mr`. */
rdmad_status rdmad_deregister(rdmad_client* client, rdmad_mr* mr);

/* Daemon-wide handle of a registration (also the one rdmad_list_registrations reports). */
uint64_t rdmad_mr_handle(const rdmad_mr* mr);
/* Address of the registration's first byte in the daemon's keys (exports are addressed from it). */
uint64_t rdmad_mr_iova(const rdmad_mr* mr);
uint64_t rdmad_mr_length(const rdmad_mr* mr);
/* Number of NICs the registration is valid on, and their keys. */
size_t rdmad_mr_nic_count(const rdmad_mr* mr);
rdmad_status rdmad_mr_key(const rdmad_mr* mr, size_t i, rdmad_nic_key* out);
/* 1 when the daemon restarted after this registration was made and did not keep it (it is gone
 * there); 0 while it is valid, also across a restart that kept the client's session. */
int rdmad_mr_is_lost(const rdmad_mr* mr);

/* Lists this connection's registrations in the daemon. */
rdmad_status rdmad_list_registrations(rdmad_client* client, rdmad_registration_info* out, size_t capacity,
                                      size_t* count);

/* Registers [offset, offset+length) of a dma-buf the caller exported itself (e.g. NCCL's
 * regMrDmaBuf: cuMemGetHandleForAddressRange) whose first registered byte is at device address
 * device_ptr (the registration's address; also how the GPU's PCI address, and so the nearest NICs,
 * are found). The fd stays the caller's. Repeating an
 * identical registration (same dma-buf, offset, length, access, nic_mask) adds a reference. */
rdmad_status rdmad_register_dmabuf(rdmad_client* client, int fd, uint64_t offset, uint64_t length,
                                   uint64_t device_ptr, uint32_t access, uint32_t nic_mask, rdmad_mr** out);

/* Writes the daemon's GPUDirect RDMA diagnosis, one line per check, NUL-terminated. */
rdmad_status rdmad_diagnose(rdmad_client* client, char* out, size_t capacity);

/* ---- Flows: transfers to another node through its rdmad -------------------------------------
 * A flow carries this client's requests to one peer node. Requests go through a shared-memory
 * ring (no system call per request on a busy flow); the daemon splits each into chunks, spreads
 * them over the node's NICs (or the NICs the flow is pinned to: rdmad_flow_open_nics) and
 * completes the request when every byte is placed. Completions come in submission order. One
 * thread at a time per flow. */
typedef struct rdmad_flow rdmad_flow;

enum { RDMAD_NODE_ID_BYTES = 64 }; /* a node id and its NUL */

/* Writes this node's id on the peer channel (what another node's rdmad_flow_open names to reach
 * it), NUL-terminated. RDMAD_ERR_NOT_SUPPORTED when flows are off ([peer] enabled = false). */
rdmad_status rdmad_node_id(rdmad_client* client, char out[RDMAD_NODE_ID_BYTES]);

/* Names memory another node exported to this one (rdmad_export on that node). */
typedef struct rdmad_token {
  uint8_t bytes[16];
} rdmad_token;
enum { RDMAD_TOKEN_STRING_BYTES = 33 }; /* 32 hex digits + NUL */

/* An imported token: usable with rdmad_flow_write/read on the flow it was imported on. */
typedef struct rdmad_remote {
  uint64_t handle;
  uint64_t length;
  uint32_t rights; /* RDMAD_ACCESS_REMOTE_WRITE / _READ */
} rdmad_remote;

typedef enum rdmad_flow_state {
  RDMAD_FLOW_CONNECTING = 0,   /* the peer daemon is not connected yet */
  RDMAD_FLOW_CONNECTED = 1,
  RDMAD_FLOW_DISCONNECTED = 2, /* lost; requests fail with RDMAD_ERR_PEER until it is back. Also while
                                * its daemon is gone (stopped, restarting, died): the next post,
                                * import or rdmad_flow_wait_connected rebinds it (see below) */
  RDMAD_FLOW_FAILED = 3        /* the flow is dead: it broke its ring protocol: close it */
} rdmad_flow_state;

typedef enum rdmad_op { RDMAD_OP_WRITE = 1, RDMAD_OP_READ = 2, RDMAD_OP_SEND = 3, RDMAD_OP_RECV = 4 } rdmad_op;

typedef struct rdmad_completion {
  uint64_t wr_id;
  uint64_t length; /* bytes moved (receives: the size of the send) */
  rdmad_status status;
  rdmad_op op;
} rdmad_completion;

typedef struct rdmad_flow_attr {
  uint64_t channel;  /* sends match receives on the peer's flow of the same channel (default 0) */
  uint32_t sq_depth; /* 0: the daemon's default; else a power of two */
  uint32_t cq_depth;
} rdmad_flow_attr;

/* Opens a flow to `peer_node` (its node id) whose chunks are spread over every NIC of this node.
 * attr NULL: defaults. The same as rdmad_flow_open_nics with nic_mask 0. */
rdmad_status rdmad_flow_open(rdmad_client* client, const char* peer_node, const rdmad_flow_attr* attr,
                             rdmad_flow** out);
/* Opens a flow pinned to the NICs (rails) in nic_mask: bit i is the NIC of index i in
 * rdmad_query_nics (nic_info.index); 0 means every NIC, as rdmad_flow_open. The flow's chunks go
 * only to those NICs, spread over them by the daemon's balancer, while at least one of them is up
 * (its path to the peer works). When all of them are down, its chunks fail over to the node's
 * other NICs, so transfers still complete, byte-exact and without an error; they return to the
 * pinned NICs as soon as one of them rejoins (the daemon counts each departure in
 * rdmad_flow_pinned_spills_total). The peer's NIC of the same index is the other end of each
 * rail. A bit that names no NIC of this node is RDMAD_ERR_INVALID_ARGUMENT (rdmad_last_error
 * says which); a daemon older than protocol version 3 cannot pin flows: RDMAD_ERR_NOT_SUPPORTED
 * for any mask but 0. */
rdmad_status rdmad_flow_open_nics(rdmad_client* client, const char* peer_node, const rdmad_flow_attr* attr,
                                  uint32_t nic_mask, rdmad_flow** out);
/* The nic_mask the flow was opened with (0: every NIC). */
uint32_t rdmad_flow_nic_mask(const rdmad_flow* flow);
/* Closes the flow (requests in flight are dropped) and frees it. NULL is a no-op. */
void rdmad_flow_close(rdmad_flow* flow);
rdmad_flow_state rdmad_flow_get_state(const rdmad_flow* flow);
/* Waits until the flow is connected; RDMAD_ERR_PEER after timeout_ms (-1: forever).
 *
 * A flow survives a restart of either daemon. Its own daemon gone (the flow's requests then
 * complete with RDMAD_ERR_DAEMON_GONE), the next post, import or wait_connected rebinds it: the
 * client reconnects and takes its session back (its registrations stay), the flow is opened
 * again with the same peer, NICs and attributes, waits for the peer, and every token imported on
 * it is imported again, within the reconnect timeout (rdmad_set_reconnect_timeout_ms; for
 * wait_connected, timeout_ms). The rdmad_flow and the rdmad_remote values stay valid: retry the
 * failed requests as they were. A token whose export did not come back in time fails its
 * requests with RDMAD_ERR_NOT_FOUND, as a revoked one. When the rebind finds no daemon, the call
 * returns RDMAD_ERR_DAEMON_GONE and the next one tries again; while the peer is not connected
 * yet, RDMAD_ERR_PEER. The peer's daemon restarting, the flow stays open: requests fail with
 * RDMAD_ERR_PEER until the peer is back and has granted its exports again (their tokens and the
 * flow's remote handles stay the same), RDMAD_ERR_NOT_FOUND for an export the restarted peer no
 * longer holds 5 s after it is back. rdmad_flow_fd keeps its number across a rebind, but the
 * eventfd behind it is a new one: an epoll set must EPOLL_CTL_ADD it again after
 * RDMAD_ERR_DAEMON_GONE completions (poll() by number needs nothing). */
rdmad_status rdmad_flow_wait_connected(rdmad_flow* flow, int timeout_ms);

/* Exports [offset, offset+length) of `mr` to node `peer_node` with `rights` (REMOTE_WRITE and/or
 * REMOTE_READ, which the registration must have). Returns when the peer daemon holds the grant. */
rdmad_status rdmad_export(rdmad_client* client, const rdmad_mr* mr, uint64_t offset, uint64_t length,
                          const char* peer_node, uint32_t rights, rdmad_token* out);
/* Withdraws an export: the peer can no longer use the token. */
rdmad_status rdmad_revoke(rdmad_client* client, const rdmad_token* token);
/* Imports a token exported by this flow's peer to this node. Importing the same token again on
 * the same flow gives the same remote handle. */
rdmad_status rdmad_flow_import(rdmad_flow* flow, const rdmad_token* token, rdmad_remote* out);
void rdmad_token_to_string(const rdmad_token* token, char out[RDMAD_TOKEN_STRING_BYTES]);
rdmad_status rdmad_token_from_string(const char* text, rdmad_token* out);

/* Posts a request; RDMAD_ERR_NO_RESOURCE when the submission ring is full (poll, then retry).
 * Once the library knows the flow's daemon is gone, the post first rebinds the flow
 * (rdmad_flow_wait_connected; it may block up to the reconnect timeout) and returns the rebind's
 * error when that fails (RDMAD_ERR_DAEMON_GONE, RDMAD_ERR_PEER).
 * write: local → remote; read: remote → local (the registration needs LOCAL_WRITE); send: local →
 * the next receive the peer posted on the same channel; recv: a buffer (REMOTE_WRITE) for one send. */
rdmad_status rdmad_flow_write(rdmad_flow* flow, uint64_t wr_id, const rdmad_mr* local, uint64_t local_offset,
                              const rdmad_remote* remote, uint64_t remote_offset, uint64_t length);
rdmad_status rdmad_flow_read(rdmad_flow* flow, uint64_t wr_id, const rdmad_mr* local, uint64_t local_offset,
                             const rdmad_remote* remote, uint64_t remote_offset, uint64_t length);
rdmad_status rdmad_flow_send(rdmad_flow* flow, uint64_t wr_id, const rdmad_mr* local, uint64_t offset,
                             uint64_t length);
rdmad_status rdmad_flow_recv(rdmad_flow* flow, uint64_t wr_id, const rdmad_mr* local, uint64_t offset,
                             uint64_t length);

/* Takes up to `max` completions; returns how many (never blocks). Once the flow's daemon is gone
 * (its connection closed: SIGTERM, crash, SIGKILL), every request posted and not completed by the
 * daemon completes here with RDMAD_ERR_DAEMON_GONE and length 0, oldest first: none is lost (also
 * across a rebind: the old daemon's come before the new one's). With
 * requests outstanding and none completing, it looks at the connection at most once a millisecond. */
size_t rdmad_flow_poll(rdmad_flow* flow, rdmad_completion* out, size_t max);
/* Blocks until a completion is ready to poll or timeout_ms passes (-1: forever), watching the
 * daemon's connection too. RDMAD_OK when one is ready (also the library's DAEMON_GONE completions),
 * RDMAD_ERR_NO_RESOURCE on timeout, RDMAD_ERR_PEER when the flow failed, RDMAD_ERR_DAEMON_GONE
 * when the daemon is gone and nothing is left to poll. */
rdmad_status rdmad_flow_wait(rdmad_flow* flow, int timeout_ms);
/* The completion eventfd, for an event loop: call rdmad_flow_arm(), and when it returns 0 wait
 * until the fd is readable (then read it and poll). rdmad_flow_arm returns 1 when completions are
 * already there, or when the daemon is gone with requests outstanding (it looks at the connection:
 * an event loop that also wakes on a timer learns of a dead daemon through it; the eventfd alone
 * never fires for one). */
int rdmad_flow_fd(const rdmad_flow* flow);
int rdmad_flow_arm(rdmad_flow* flow);

#if defined(__GNUC__)
#pragma GCC visibility pop
#endif

#ifdef __cplusplus
}
#endif

#endif /* RDMAD_RDMAD_H */
