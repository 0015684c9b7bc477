/* Writes a buffer from one node to another through two rdmad daemons and verifies it.
 *
 * One process is the client of both daemons: it registers host memory on each side, exports the
 * destination from the target node, imports it on a flow from the source node and writes the
 * source into it in pieces, several in flight. While it runs it shows the progress and, scraped
 * from the source daemon's /metrics, how the bytes split over its NICs and how many congestion
 * notifications each NIC handled. It ends by comparing the two buffers byte for byte.
 *
 * Usage: transfer --from SOCK_A --from-node ID_A --to SOCK_B --to-node ID_B [--bytes SIZE]
 *                 [--request SIZE] [--in-flight N] [--metrics-a URL] [--metrics-b URL]
 *                 [--chunk-report-ms MS]
 * SIZE takes a K, M or G suffix (binary: 1G = 2^30 bytes). */
#define _GNU_SOURCE
#include <errno.h>
#include <netdb.h>
#include <rdmad/rdmad.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

enum { kMaxNics = RDMAD_MAX_NICS, kMaxInFlight = 64 };

typedef struct options {
  const char* from_socket;
  const char* from_node;
  const char* to_socket;
  const char* to_node;
  const char* metrics_a; /* http://host:port/path, or NULL */
  const char* metrics_b;
  uint64_t bytes;
  uint64_t request_bytes;
  unsigned in_flight;
  int report_ms; /* 0: 200 on a terminal, 1000 otherwise */
} options;

/* What one scrape of node-a's (and optionally node-b's) /metrics says per NIC. */
typedef struct nic_sample {
  char name[32];
  double bytes_sent;    /* rdmad_balancer_bytes_sent_total */
  double weight;        /* rdmad_balancer_weight */
  double cnp_handled;   /* rdmad_rp_cnp_packets_handled_total (reaction point, sender side) */
  double failovers;     /* rdmad_balancer_failovers_total */
  double retransmitted; /* rdmad_retransmitted_packets_total */
  /* rdmad_dcqcn_rate_mbps histogram (the soft reaction points' rates, sampled every second):
   * its _sum and _count now and at the previous scrape give the mean rate in between. */
  double rate_sum, rate_count, prev_rate_sum, prev_rate_count;
  double dcqcn_mbps; /* mean sampled DCQCN rate since the previous scrape; -1 when no sample */
} nic_sample;

typedef struct peer_sample {
  char name[32];
  double ecn_marked; /* rdmad_np_ecn_marked_roce_packets_received_total (receiver side) */
  double cnp_sent;   /* rdmad_np_cnp_packets_sent_total */
  double rx_dropped; /* rdmad_port_rx_dropped_packets_total */
} peer_sample;

static int fail(const char* what, rdmad_status s, const rdmad_client* client) {
  const char* detail = rdmad_last_error(client);
  fprintf(stderr, "transfer: %s failed: %s%s%s\n", what, rdmad_strerror(s), detail && *detail ? ": " : "",
          detail ? detail : "");
  return 1;
}

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int parse_size(const char* text, uint64_t* out) {
  char* end = NULL;
  errno = 0;
  unsigned long long v = strtoull(text, &end, 10);
  if (errno != 0 || end == text) return -1;
  unsigned shift = 0;
  if (*end == 'K' || *end == 'k') shift = 10;
  if (*end == 'M' || *end == 'm') shift = 20;
  if (*end == 'G' || *end == 'g') shift = 30;
  if (shift != 0) ++end;
  if (*end == 'i') ++end; /* "MiB" */
  if (*end == 'B') ++end;
  if (*end != '\0' || v == 0 || v > (UINT64_MAX >> shift)) return -1;
  *out = (uint64_t)v << shift;
  return 0;
}

static int usage(const char* why) {
  fprintf(stderr,
          "transfer: %s\nusage: transfer --from SOCK_A --from-node ID_A --to SOCK_B --to-node ID_B [--bytes "
          "SIZE]\n"
          "                [--request SIZE] [--in-flight N] [--metrics-a URL] [--metrics-b URL] "
          "[--chunk-report-ms MS]\n",
          why);
  return 2;
}

static int parse_options(int argc, char** argv, options* o) {
  *o = (options){.bytes = 1ull << 30, .request_bytes = 16ull << 20, .in_flight = 8};
  for (int i = 1; i < argc; ++i) {
    const char* k = argv[i];
    if (i + 1 >= argc) return usage("an option lacks its value");
    const char* v = argv[++i];
    if (strcmp(k, "--from") == 0)
      o->from_socket = v;
    else if (strcmp(k, "--from-node") == 0)
      o->from_node = v;
    else if (strcmp(k, "--to") == 0)
      o->to_socket = v;
    else if (strcmp(k, "--to-node") == 0)
      o->to_node = v;
    else if (strcmp(k, "--metrics-a") == 0)
      o->metrics_a = v;
    else if (strcmp(k, "--metrics-b") == 0)
      o->metrics_b = v;
    else if (strcmp(k, "--bytes") == 0) {
      if (parse_size(v, &o->bytes) != 0) return usage("bad --bytes");
    } else if (strcmp(k, "--request") == 0) {
      if (parse_size(v, &o->request_bytes) != 0) return usage("bad --request");
    } else if (strcmp(k, "--in-flight") == 0) {
      o->in_flight = (unsigned)atoi(v);
      if (o->in_flight < 1 || o->in_flight > kMaxInFlight) return usage("--in-flight must be 1..64");
    } else if (strcmp(k, "--chunk-report-ms") == 0) {
      o->report_ms = atoi(v);
      if (o->report_ms < 10) return usage("--chunk-report-ms must be at least 10");
    } else {
      return usage("unknown option");
    }
  }
  if (!o->from_socket || !o->from_node || !o->to_socket || !o->to_node)
    return usage("--from, --from-node, --to and --to-node are required");
  return 0;
}

/* ---- /metrics: a plain HTTP/1.0 GET ------------------------------------------------------------ */

/* Fetches url (http://host:port/path) into a malloc'ed NUL-terminated body; NULL on any failure. */
static char* http_get(const char* url) {
  char host[256], port[16] = "80";
  const char* path = "/";
  if (strncmp(url, "http://", 7) != 0) return NULL;
  const char* h = url + 7;
  size_t hl = strcspn(h, ":/");
  if (hl == 0 || hl >= sizeof(host)) return NULL;
  memcpy(host, h, hl);
  host[hl] = '\0';
  const char* rest = h + hl;
  if (*rest == ':') {
    size_t pl = strcspn(rest + 1, "/");
    if (pl == 0 || pl >= sizeof(port)) return NULL;
    memcpy(port, rest + 1, pl);
    port[pl] = '\0';
    rest += 1 + pl;
  }
  if (*rest == '/') path = rest;

  struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ai = NULL;
  if (getaddrinfo(host, port, &hints, &ai) != 0) return NULL;
  int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, 0);
  struct timeval tv = {.tv_sec = 2};
  if (fd >= 0) {
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  }
  int ok = fd >= 0 && connect(fd, ai->ai_addr, ai->ai_addrlen) == 0;
  freeaddrinfo(ai);
  char request[512];
  int n = snprintf(request, sizeof(request), "GET %s HTTP/1.0\r\nHost: %s\r\nConnection: close\r\n\r\n", path,
                   host);
  ok = ok && n > 0 && (size_t)n < sizeof(request) && send(fd, request, (size_t)n, MSG_NOSIGNAL) == n;
  size_t cap = 1 << 16, len = 0;
  char* buf = ok ? malloc(cap) : NULL;
  while (buf != NULL) {
    if (len + 1 == cap) {
      char* bigger = realloc(buf, cap *= 2);
      if (bigger == NULL) break;
      buf = bigger;
    }
    ssize_t r = recv(fd, buf + len, cap - len - 1, 0);
    if (r == 0) break;
    if (r < 0) {
      if (errno == EINTR) continue;
      free(buf);
      buf = NULL;
      break;
    }
    len += (size_t)r;
  }
  if (fd >= 0) close(fd);
  if (buf == NULL) return NULL;
  buf[len] = '\0';
  char* body = strstr(buf, "\r\n\r\n");
  if (strncmp(buf, "HTTP/1.", 7) != 0 || strncmp(buf + 8, " 200", 4) != 0 || body == NULL) {
    free(buf);
    return NULL;
  }
  memmove(buf, body + 4, len - (size_t)(body + 4 - buf) + 1);
  return buf;
}

/* Value of the first sample of `name` whose labels include device="<device>"; -1 when absent. */
static double metric(const char* body, const char* name, const char* device) {
  char label[64];
  snprintf(label, sizeof(label), "device=\"%s\"", device);
  size_t nl = strlen(name);
  for (const char* line = body; line != NULL && *line != '\0';) {
    const char* end = strchr(line, '\n');
    size_t ll = end ? (size_t)(end - line) : strlen(line);
    if (ll > nl && strncmp(line, name, nl) == 0 && line[nl] == '{') {
      const char* close = memchr(line, '}', ll);
      const char* found = strstr(line, label);
      if (close != NULL && found != NULL && found < close) return strtod(close + 1, NULL);
    }
    line = end ? end + 1 : NULL;
  }
  return -1;
}

/* Scrapes node-a (and node-b when given); returns 0 when node-a answered. */
static int scrape(const options* o, nic_sample* a, size_t na, peer_sample* b, size_t nb) {
  char* body = o->metrics_a ? http_get(o->metrics_a) : NULL;
  if (body == NULL) return -1;
  for (size_t i = 0; i < na; ++i) {
    a[i].bytes_sent = metric(body, "rdmad_balancer_bytes_sent_total", a[i].name);
    a[i].weight = metric(body, "rdmad_balancer_weight", a[i].name);
    a[i].cnp_handled = metric(body, "rdmad_rp_cnp_packets_handled_total", a[i].name);
    a[i].failovers = metric(body, "rdmad_balancer_failovers_total", a[i].name);
    a[i].retransmitted = metric(body, "rdmad_retransmitted_packets_total", a[i].name);
    a[i].prev_rate_sum = a[i].rate_sum;
    a[i].prev_rate_count = a[i].rate_count;
    a[i].rate_sum = metric(body, "rdmad_dcqcn_rate_mbps_sum", a[i].name);
    a[i].rate_count = metric(body, "rdmad_dcqcn_rate_mbps_count", a[i].name);
    if (a[i].rate_count > a[i].prev_rate_count && a[i].prev_rate_count >= 0)
      a[i].dcqcn_mbps = (a[i].rate_sum - a[i].prev_rate_sum) / (a[i].rate_count - a[i].prev_rate_count);
  }
  free(body);
  body = o->metrics_b ? http_get(o->metrics_b) : NULL;
  for (size_t i = 0; body != NULL && i < nb; ++i) {
    b[i].ecn_marked = metric(body, "rdmad_np_ecn_marked_roce_packets_received_total", b[i].name);
    b[i].cnp_sent = metric(body, "rdmad_np_cnp_packets_sent_total", b[i].name);
    b[i].rx_dropped = metric(body, "rdmad_port_rx_dropped_packets_total", b[i].name);
  }
  free(body);
  return 0;
}

/* Fills the names of a client's NICs; returns how many. */
static size_t nic_names(rdmad_client* c, char (*names)[32], size_t cap) {
  rdmad_nic_info info[kMaxNics];
  size_t count = 0;
  if (rdmad_query_nics(c, info, kMaxNics, &count) != RDMAD_OK) return 0;
  if (count > cap) count = cap;
  for (size_t i = 0; i < count; ++i) snprintf(names[i], 32, "%s", info[i].name);
  return count;
}

/* ---- Progress -------------------------------------------------------------------------------- */

static void print_split(FILE* out, const nic_sample* a, size_t na, const peer_sample* b, size_t nb,
                        int one_line) {
  double total = 0;
  for (size_t i = 0; i < na; ++i) total += a[i].bytes_sent > 0 ? a[i].bytes_sent : 0;
  for (size_t i = 0; i < na; ++i) {
    double share = total > 0 && a[i].bytes_sent > 0 ? 100.0 * a[i].bytes_sent / total : 0;
    if (one_line) {
      fprintf(out, " %s %.0f%%", a[i].name, share);
      if (a[i].cnp_handled > 0) fprintf(out, " (%.0f CNPs)", a[i].cnp_handled);
      if (a[i].dcqcn_mbps >= 0) fprintf(out, " dcqcn %.0f Mb/s", a[i].dcqcn_mbps);
      continue;
    }
    fprintf(out,
            "transfer:   %-8s %8.1f MiB %5.1f%%  weight %.2f  CNPs handled %.0f  retransmitted %.0f  "
            "failovers %.0f",
            a[i].name, a[i].bytes_sent / 1048576.0, share, a[i].weight, a[i].cnp_handled, a[i].retransmitted,
            a[i].failovers);
    if (a[i].dcqcn_mbps >= 0) fprintf(out, "  DCQCN rate %.0f Mb/s", a[i].dcqcn_mbps);
    if (i < nb && b[i].ecn_marked >= 0)
      fprintf(out, "  | %s: CE received %.0f, CNPs sent %.0f, dropped %.0f", b[i].name, b[i].ecn_marked,
              b[i].cnp_sent, b[i].rx_dropped);
    fputc('\n', out);
  }
}

static void report(int tty, uint64_t done, uint64_t total, double elapsed, const nic_sample* a, size_t na,
                   const peer_sample* b, size_t nb, int have_metrics) {
  double mbps = elapsed > 0 ? (double)done / elapsed / 1e6 : 0;
  int pct = (int)(100.0 * (double)done / (double)total);
  if (tty) {
    enum { kWidth = 30 };
    char bar[kWidth + 1];
    int fill = pct * kWidth / 100;
    for (int i = 0; i < kWidth; ++i) bar[i] = i < fill ? '#' : '.';
    bar[kWidth] = '\0';
    fprintf(stderr, "\r[%s] %3d%% %6.0f/%.0f MiB %7.1f MB/s", bar, pct, (double)done / 1048576.0,
            (double)total / 1048576.0, mbps);
    if (have_metrics) print_split(stderr, a, na, b, nb, 1);
    fputs("\033[K", stderr);
  } else {
    fprintf(stderr, "transfer: %3d%% %.0f/%.0f MiB %.1f MB/s", pct, (double)done / 1048576.0,
            (double)total / 1048576.0, mbps);
    if (have_metrics) print_split(stderr, a, na, b, nb, 1);
    fputc('\n', stderr);
  }
  fflush(stderr);
}

/* ---- The transfer ---------------------------------------------------------------------------- */

static void fill_pattern(uint64_t* w, size_t words, uint64_t seed) {
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (size_t i = 0; i < words; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    w[i] = x;
  }
}

typedef struct side {
  rdmad_client* client;
  rdmad_host_buffer buf;
  rdmad_mr* mr;
} side;

static int setup_side(const char* socket_path, uint64_t bytes, side* s) {
  rdmad_status st = rdmad_connect(socket_path, &s->client);
  if (st != RDMAD_OK) {
    fprintf(stderr, "transfer: connect to %s failed: %s: %s\n", socket_path, rdmad_strerror(st),
            rdmad_last_error(NULL));
    return 1;
  }
  st = rdmad_alloc_host(bytes, &s->buf);
  if (st != RDMAD_OK) return fail("rdmad_alloc_host", st, NULL);
  const uint32_t access = RDMAD_ACCESS_LOCAL_WRITE | RDMAD_ACCESS_REMOTE_WRITE | RDMAD_ACCESS_REMOTE_READ;
  st = rdmad_register_host(s->client, s->buf.fd, 0, bytes, access, 0, &s->mr);
  if (st != RDMAD_OK) return fail("rdmad_register_host", st, s->client);
  return 0;
}

static void teardown_side(side* s) {
  if (s->mr != NULL) rdmad_deregister(s->client, s->mr);
  if (s->buf.addr != NULL) rdmad_free_host(&s->buf);
  rdmad_disconnect(s->client);
}

/* Posts the write in requests of o->request_bytes with up to o->in_flight outstanding. */
static int run_writes(const options* o, rdmad_flow* flow, rdmad_client* ca, const side* a,
                      const rdmad_remote* remote, nic_sample* ns, size_t na, peer_sample* ps, size_t nb) {
  const int tty = isatty(STDERR_FILENO);
  const int report_ms = o->report_ms > 0 ? o->report_ms : (tty ? 200 : 1000);
  const uint64_t requests = (o->bytes + o->request_bytes - 1) / o->request_bytes;
  uint64_t posted = 0, completed = 0, done_bytes = 0;
  const double start = now_s();
  double next_report = start + report_ms / 1000.0;
  while (completed < requests) {
    while (posted < requests && posted - completed < o->in_flight) {
      uint64_t off = posted * o->request_bytes;
      uint64_t len = o->bytes - off < o->request_bytes ? o->bytes - off : o->request_bytes;
      rdmad_status st = rdmad_flow_write(flow, posted, a->mr, off, remote, off, len);
      if (st == RDMAD_ERR_NO_RESOURCE) break; /* ring full: take completions first */
      if (st != RDMAD_OK) return fail("rdmad_flow_write", st, ca);
      ++posted;
    }
    rdmad_completion c[kMaxInFlight];
    size_t got = rdmad_flow_poll(flow, c, kMaxInFlight);
    for (size_t i = 0; i < got; ++i) {
      if (c[i].status != RDMAD_OK) {
        fprintf(stderr, "\ntransfer: write %llu (offset %llu) failed: %s (flow state %d)\n",
                (unsigned long long)c[i].wr_id, (unsigned long long)(c[i].wr_id * o->request_bytes),
                rdmad_strerror(c[i].status), (int)rdmad_flow_get_state(flow));
        return 1;
      }
      if (c[i].wr_id != completed) {
        fprintf(stderr, "\ntransfer: completion for request %llu, expected %llu (out of order)\n",
                (unsigned long long)c[i].wr_id, (unsigned long long)completed);
        return 1;
      }
      ++completed;
      done_bytes += c[i].length;
    }
    double now = now_s();
    if (now >= next_report || completed == requests) {
      int have = scrape(o, ns, na, ps, nb) == 0;
      report(tty, done_bytes, o->bytes, now - start, ns, na, ps, nb, have);
      next_report = now + report_ms / 1000.0;
    }
    if (got == 0 && completed < requests) {
      int wait_ms = (int)((next_report - now) * 1000.0) + 1;
      rdmad_status st = rdmad_flow_wait(flow, wait_ms);
      if (st == RDMAD_ERR_PEER) {
        fprintf(stderr, "\ntransfer: the flow to %s failed (state %d)\n", o->to_node,
                (int)rdmad_flow_get_state(flow));
        return 1;
      }
    }
  }
  const double elapsed = now_s() - start;
  if (tty) fputc('\n', stderr);
  if (done_bytes != o->bytes) {
    fprintf(stderr, "transfer: completions account for %llu bytes of %llu\n", (unsigned long long)done_bytes,
            (unsigned long long)o->bytes);
    return 1;
  }
  printf("transfer: wrote %llu bytes in %.2f s (%.1f MB/s)\n", (unsigned long long)o->bytes, elapsed,
         (double)o->bytes / elapsed / 1e6);
  return 0;
}

int main(int argc, char** argv) {
  options o;
  int rc = parse_options(argc, argv, &o);
  if (rc != 0) return rc;
  side a = {0}, b = {0};
  rdmad_flow* flow = NULL;
  rc = setup_side(o.from_socket, o.bytes, &a) || setup_side(o.to_socket, o.bytes, &b);
  if (rc != 0) goto out;

  fill_pattern(a.buf.addr, o.bytes / 8, 42);
  memset(b.buf.addr, 0, o.bytes);
  memset((char*)a.buf.addr + (o.bytes & ~7ull), 0xa5, o.bytes & 7);

  rdmad_token token;
  rdmad_status st = rdmad_export(b.client, b.mr, 0, o.bytes, o.from_node, RDMAD_ACCESS_REMOTE_WRITE, &token);
  if (st != RDMAD_OK) {
    rc = fail("rdmad_export", st, b.client);
    goto out;
  }
  char token_text[RDMAD_TOKEN_STRING_BYTES];
  rdmad_token_to_string(&token, token_text);
  st = rdmad_flow_open(a.client, o.to_node, NULL, &flow);
  if (st != RDMAD_OK) {
    rc = fail("rdmad_flow_open", st, a.client);
    goto out;
  }
  st = rdmad_flow_wait_connected(flow, 15000);
  if (st != RDMAD_OK) {
    rc = fail("rdmad_flow_wait_connected", st, a.client);
    fprintf(stderr,
            "transfer: the flow from %s to %s did not connect within 15 s: is %s running and one of %s's "
            "[[peers]]?\n",
            o.from_node, o.to_node, o.to_node, o.from_node);
    goto out;
  }
  rdmad_remote remote;
  st = rdmad_flow_import(flow, &token, &remote);
  if (st != RDMAD_OK) {
    rc = fail("rdmad_flow_import", st, a.client);
    goto out;
  }
  printf("transfer: %s exported %llu bytes to %s as token %s; writing in %llu MiB requests, %u in flight\n",
         o.to_node, (unsigned long long)remote.length, o.from_node, token_text,
         (unsigned long long)(o.request_bytes >> 20), o.in_flight);
  fflush(stdout);

  nic_sample ns[kMaxNics] = {0};
  peer_sample ps[kMaxNics] = {0};
  char names[kMaxNics][32];
  size_t na = nic_names(a.client, names, kMaxNics);
  for (size_t i = 0; i < na; ++i) {
    memcpy(ns[i].name, names[i], 32);
    ns[i].dcqcn_mbps = -1;
  }
  size_t nb = nic_names(b.client, names, kMaxNics);
  for (size_t i = 0; i < nb; ++i) memcpy(ps[i].name, names[i], 32);

  rc = run_writes(&o, flow, a.client, &a, &remote, ns, na, ps, nb);
  if (rc != 0) goto out;

  if (scrape(&o, ns, na, ps, nb) == 0) {
    printf("transfer: per-NIC split on %s (rdmad_balancer_bytes_sent_total, all transfers so far):\n",
           o.from_node);
    print_split(stdout, ns, na, ps, nb, 0);
  } else if (o.metrics_a != NULL) {
    printf("transfer: could not scrape %s\n", o.metrics_a);
  }
  if (memcmp(a.buf.addr, b.buf.addr, o.bytes) != 0) {
    const unsigned char* x = a.buf.addr;
    const unsigned char* y = b.buf.addr;
    uint64_t i = 0;
    while (x[i] == y[i]) ++i;
    fprintf(stderr, "transfer: MISMATCH at byte %llu of %llu (sent 0x%02x, received 0x%02x)\n",
            (unsigned long long)i, (unsigned long long)o.bytes, x[i], y[i]);
    rc = 1;
    goto out;
  }
  printf("transfer: verified %llu bytes byte-exact\n", (unsigned long long)o.bytes);
out:
  rdmad_flow_close(flow);
  if (b.client != NULL) teardown_side(&b);
  if (a.client != NULL) teardown_side(&a);
  fflush(stdout);
  return rc;
}
