// What a NIC's datapaths share: the port, the memory-region table (filled and emptied on the
// registering thread, against the datapaths' and posting threads' seqlock reads), QP numbers, the
// counters summed, the DCQCN parameters.
#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <stdexcept>
#include <thread>

#include "datapath.h"

namespace rdmad::verbs::engine {
namespace {

std::atomic<uint32_t> g_next_nic_id{1};

}  // namespace

Nic::Nic(const EngineConfig& config, const PortFactory& make_port)
    : config_(config),
      dcqcn_(config.dcqcn),
      id_(g_next_nic_id.fetch_add(1)),
      numbering_(config.max_qps),
      mrs_(std::make_unique<MrEntry[]>(kMaxMrs)),
      qpn_(config.max_qps),
      last_qpn_(config.max_qps),
      qps_on_(config.datapath_threads) {
  if (config.datapath_threads == 0 || config.datapath_threads > kMaxDatapathThreads ||
      config.datapath_threads > config.max_qps) {
    throw std::runtime_error("engine nic: datapath_threads must be 1.." + std::to_string(kMaxDatapathThreads));
  }
  auto port = make_port(PortSteering{numbering_.index_mask(), config.datapath_threads});
  if (!port.ok()) throw std::runtime_error(port.status().message());
  port_ = std::move(port.value());
  if (!config.relay_address.empty()) {
    const auto relay = Gid::from_ip(config.relay_address);
    if (!relay || relay->is_ipv4_mapped() == port_->local_ip().v6 || config.relay_udp_port == 0) {
      throw std::runtime_error(config.backend + " nic: relay " + config.relay_address + ":" +
                               std::to_string(config.relay_udp_port) +
                               " is not an address of the nic's family with a port");
    }
  }
  if (port_->queue_count() != config.datapath_threads) {
    throw std::runtime_error("engine nic: the port opened " + std::to_string(port_->queue_count()) + " queues for " +
                             std::to_string(config.datapath_threads) + " datapath threads");
  }
  for (uint32_t i = 0; i < config.datapath_threads; ++i) {
    datapaths_.push_back(std::make_unique<Datapath>(*this, i, port_->queue(i)));
  }
  for (auto& d : datapaths_) d->start();
}

Nic::~Nic() {
  // Every thread stops before any queue goes: a datapath may still flush into its queue.
  for (auto& d : datapaths_) d->stop();
  datapaths_.clear();
  port_.reset();
}

void Nic::run_all(const std::function<void(Datapath&)>& fn) {
  for (auto& d : datapaths_) d->run([&] { fn(*d); });
}

Result<uint32_t> Nic::reserve_qpn() {
  uint32_t r[2];
  if (!random_bytes(r, sizeof r)) return Status::error(std::string("engine nic: getrandom: ") + std::strerror(errno));
  std::lock_guard lock(qpn_mu_);
  // The least loaded datapath takes the QP; within its entries, a random one first (the index is
  // part of the number, and a table filled from the front would give those bits away).
  const uint32_t n = datapath_count();
  const auto d = static_cast<uint32_t>(std::min_element(qps_on_.begin(), qps_on_.end()) - qps_on_.begin());
  const uint32_t slots = (numbering_.table() + n - 1) / n;  // entries d, d + n, d + 2n, ...
  for (uint32_t k = 0; k < slots; ++k) {
    const uint32_t index = ((r[0] + k) % slots) * n + d;
    if (index >= numbering_.table() || qpn_[index] != 0) continue;
    uint32_t qpn = numbering_.make(index, r[1]);
    // Never a special QPN, nor the entry's previous one (late packets for that QP must miss).
    for (uint32_t bump = 1; !usable_qpn(qpn) || qpn == last_qpn_[index]; ++bump) {
      qpn = numbering_.make(index, r[1] + bump * numbering_.table());
    }
    qpn_[index] = qpn;
    last_qpn_[index] = qpn;
    ++qps_on_[d];
    return qpn;
  }
  return Status::no_resource("engine nic: queue pair table full");
}

void Nic::release_qpn(uint32_t qpn) {
  std::lock_guard lock(qpn_mu_);
  const uint32_t index = numbering_.index(qpn);
  if (qpn_[index] != qpn) return;
  qpn_[index] = 0;
  --qps_on_[index % datapath_count()];
}

void Nic::add_poster(std::shared_ptr<QpShared> s) {
  std::lock_guard lock(posters_mu_);
  posters_.push_back(std::move(s));
}

void Nic::remove_poster(const std::shared_ptr<QpShared>& s) {
  std::lock_guard lock(posters_mu_);
  std::erase(posters_, s);
}

NicCounters Nic::counters() const {
  NicCounters c;
  for (const auto& d : datapaths_) d->add_counters(c);
  const uint64_t overflow = port_->rx_overflow_drops();
  c.rx_dropped_by_reason[static_cast<size_t>(RxDropReason::kQueueOverflow)] += overflow;
  c.rx_dropped += overflow;
  return c;
}

std::vector<const base::Heartbeat*> Nic::heartbeats() const {
  std::vector<const base::Heartbeat*> out;
  for (const auto& d : datapaths_) out.push_back(&d->heartbeat());
  return out;
}

cc::DcqcnParams Nic::dcqcn_params() const {
  std::lock_guard lock(dcqcn_mu_);
  return dcqcn_;
}

void Nic::set_dcqcn_params(const cc::DcqcnParams& params) {
  {
    std::lock_guard lock(dcqcn_mu_);
    dcqcn_ = params;
  }
  run_all([&](Datapath& d) { d.set_dcqcn_params(params); });
}

Status Nic::add_mr(void* addr, size_t length, uint32_t access, uint32_t pd_id, uint32_t* key) {
  uint32_t r[2];
  if (!random_bytes(r, sizeof r)) return Status::error(std::string("engine nic: getrandom: ") + std::strerror(errno));
  std::lock_guard lock(mr_mu_);
  // The search starts at a random entry: the index is part of the key, and a table filled from the
  // front would give those bits away.
  for (uint32_t n = 0; n < kMaxMrs; ++n) {
    const uint32_t i = mr_index(r[0] + n);
    MrEntry& e = mrs_[i];
    if (i == 0 || e.key.load(std::memory_order_relaxed) != 0) continue;  // entry 0 is never used
    uint32_t k = mr_key(i, r[1]);
    if (k == e.last_key) k = mr_key(i, r[1] + kMaxMrs);  // a late packet for the old key must miss
    // A reader that sees any of these stores also sees the key cleared by remove_mr (seqlock).
    std::atomic_thread_fence(std::memory_order_release);
    e.addr.store(reinterpret_cast<uint64_t>(addr), std::memory_order_relaxed);
    e.length.store(length, std::memory_order_relaxed);
    e.access.store(access, std::memory_order_relaxed);
    e.pd_id.store(pd_id, std::memory_order_relaxed);
    e.last_key = k;
    *key = k;
    e.key.store(k, std::memory_order_release);
    return Status::success();
  }
  return Status::no_resource("engine nic: memory region table full");
}

void Nic::remove_mr(uint32_t key) {
  const uint32_t i = mr_index(key);
  {
    std::lock_guard lock(mr_mu_);
    // seq_cst: ordered against the datapath's pass_state_ store and a posting thread's raise of
    // PostCrcRing::reading (wait_posts), both made before their key lookups.
    if (i == 0 || mrs_[i].key.load(std::memory_order_relaxed) != key) return;
    mrs_[i].key.store(0, std::memory_order_seq_cst);
  }
  for (const auto& d : datapaths_) d->wait_pass();
  std::vector<std::shared_ptr<QpShared>> qps;
  {
    std::lock_guard lock(posters_mu_);
    qps = posters_;
  }
  wait_posts(qps);
}

bool Nic::find_mr(uint32_t key, MrView* out) const {
  const uint32_t i = mr_index(key);
  if (i == 0) return false;
  const MrEntry& e = mrs_[i];
  // A seqlock read, so that posting threads may call it too. seq_cst: ordered against
  // remove_mr's clear (crc_at_post.cc explains the pairing). On x86 this costs the datapath
  // nothing over plain loads but the second look at the key.
  if (e.key.load(std::memory_order_seq_cst) != key) return false;
  *out = {e.addr.load(std::memory_order_relaxed), e.length.load(std::memory_order_relaxed),
          e.access.load(std::memory_order_relaxed), e.pd_id.load(std::memory_order_relaxed)};
  std::atomic_thread_fence(std::memory_order_acquire);
  return e.key.load(std::memory_order_relaxed) == key;  // not refilled while we read
}


}  // namespace rdmad::verbs::engine
