#include "rdmad/daemon/clients/ipc_metrics.h"

#include <string>

#include "rdmad/metrics/metric.h"

namespace rdmad::clients {
namespace {

constexpr const char* kOpNames[] = {
    "unknown",       "hello",           "query_nics", "nearest_nics",
    "register_host", "register_dmabuf", "deregister", "list",
    "diagnose",      "flow_open",       "flow_close", "export",
    "import",        "revoke",          "list_flows", "list_all_registrations",
    "cc_show",       "cc_set",          "reload",     "nic_details",
    "list_peers",    "list_gids",       "status",     "resume",
    "query_registration", "node_id"};
static_assert(std::size(kOpNames) == proto::kMaxRequestType + 1, "a name for every request type");
constexpr const char* kResultNames[] = {
    "ok",         "invalid_argument", "permission",  "quota",  "not_supported", "not_found", "protocol",
    "connection", "version",          "no_resource", "system", "cuda",          "lost",
    "peer",       "remote_access"};

// The client service's families, declared once.
using metrics::Kind;
using metrics::Metric;
constexpr Metric kClientsConnected{"rdmad_clients_connected", "Client connections open on the Unix socket",
                                   Kind::kGauge};
constexpr Metric kQuotaUsageMaxRatio{"rdmad_quota_usage_max_ratio",
                                     "Highest per-uid quota usage (pinned bytes or registration count over the "
                                     "quota), 0..1; no uid label by design",
                                     Kind::kGauge};
constexpr Metric kRegistrationDuration{"rdmad_registration_duration_seconds",
                                       "Time to serve a memory registration request, validation to reply",
                                       Kind::kHistogram};
constexpr Metric kClientRequests{"rdmad_client_requests_total", "Client requests by operation and result",
                                 Kind::kCounter};
constexpr Metric kRegistrations{"rdmad_registrations", "Memory regions registered for clients (after deduplication)",
                                Kind::kGauge};
constexpr Metric kRegisteredBytes{"rdmad_registered_bytes",
                                  "Bytes registered for clients, page-rounded (after deduplication)", Kind::kGauge};

size_t kind_index(rdmad_mem_kind kind) { return kind == RDMAD_MEM_GPU ? 1 : 0; }

}  // namespace

IpcMetrics::IpcMetrics(prometheus::Registry& registry)
    : clients_(metrics::build_gauge(kClientsConnected, registry).Add({})),
      quota_ratio_(metrics::build_gauge(kQuotaUsageMaxRatio, registry).Add({})),
      duration_(metrics::build_histogram(kRegistrationDuration, registry)
                    .Add({}, prometheus::Histogram::BucketBoundaries{1e-6, 4e-6, 16e-6, 64e-6, 256e-6, 1e-3,
                                                                     4e-3, 16e-3, 64e-3, 0.25, 1.0, 4.0})),
      requests_(metrics::build_counter(kClientRequests, registry)) {
  auto& regions = metrics::build_gauge(kRegistrations, registry);
  auto& bytes = metrics::build_gauge(kRegisteredBytes, registry);
  const char* kinds[] = {"host", "gpu"};
  for (size_t i = 0; i < 2; ++i) {
    regions_[i] = &regions.Add({{"kind", kinds[i]}});
    bytes_[i] = &bytes.Add({{"kind", kinds[i]}});
  }
}

void IpcMetrics::region_added(rdmad_mem_kind kind, uint64_t bytes) {
  regions_[kind_index(kind)]->Increment();
  bytes_[kind_index(kind)]->Increment(static_cast<double>(bytes));
}

void IpcMetrics::region_removed(rdmad_mem_kind kind, uint64_t bytes) {
  regions_[kind_index(kind)]->Decrement();
  bytes_[kind_index(kind)]->Decrement(static_cast<double>(bytes));
}

void IpcMetrics::request(uint16_t type, rdmad_status result) {
  size_t op = type < kOps ? type : 0;
  size_t res = static_cast<size_t>(result) < kResults ? static_cast<size_t>(result) : kResults - 1;
  auto& slot = request_counters_[op][res];
  prometheus::Counter* counter = slot.load(std::memory_order_acquire);
  if (counter == nullptr) {
    counter = &requests_.Add({{"op", kOpNames[op]}, {"result", kResultNames[res]}});
    slot.store(counter, std::memory_order_release);
  }
  counter->Increment();
}

}  // namespace rdmad::clients
