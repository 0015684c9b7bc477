// The engine thread: its loop, the command queue from the control thread, and the lifecycle of
// flows and peers.
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <chrono>
#include <stdexcept>
#include <thread>

#include <spdlog/spdlog.h>

#include "engine_state.h"
#include "rdmad/base/log.h"
#include "rdmad/base/trace_points.h"

namespace rdmad::flow {

std::shared_ptr<spdlog::logger> flow_log() { return log::get(log::Component::kFlow); }

namespace {

// After the last progress the thread keeps polling this long before it sleeps: a busy flow's next
// request or a completion a few microseconds away costs no wake-up.
constexpr uint64_t kSpinUs = 200;
constexpr uint64_t kSpinBeforeYieldUs = 20;
// Sleep slices while chunks are in flight (the NICs' completion queues have no fd to wait on): the
// first is short, each further one without progress doubles, up to the longest. A chunk of a
// large transfer takes milliseconds on the wire; polling it every 50 µs cost ~13% of a core.
constexpr int64_t kInFlightSleepNs = 50'000;
constexpr int64_t kInFlightSleepMaxNs = 800'000;

}  // namespace

FlowEngine::FlowEngine(EngineOptions options, std::vector<std::string> nic_names,
                       std::vector<verbs::CompletionQueue*> cqs, clients::RegionPins& registrations,
                       ControlHooks hooks, prometheus::Histogram* duration)
    : options_(std::move(options)),
      nic_names_(std::move(nic_names)),
      cqs_(std::move(cqs)),
      registrations_(registrations),
      hooks_(std::move(hooks)),
      duration_(duration) {
  for (size_t i = 0; i < nic_names_.size(); ++i) lane_counters_.push_back(std::make_unique<LaneCounters>());
  wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_fd_ < 0) throw std::runtime_error("flow engine: eventfd failed");
  wc_buf_.resize(64);
}

FlowEngine::~FlowEngine() {
  stop();
  // Whatever is still pinned goes back (the NICs are still open: the service stops us first).
  for (auto& t : transfers_)
    if (t && t->local.pin != nullptr) registrations_.unpin(t->local.pin);
  ::close(wake_fd_);
}

void FlowEngine::start() {
  running_ = true;
  thread_ = std::thread([this] { loop(); });
  commands_.attach(thread_.get_id());
}

void FlowEngine::stop() {
  if (!thread_.joinable()) return;
  running_ = false;
  wake();
  thread_.join();
  commands_.detach();  // what the thread left queued runs here; later commands run on their callers
}

void FlowEngine::wake() {
  uint64_t one = 1;
  (void)!::write(wake_fd_, &one, sizeof(one));
}

void FlowEngine::run_sync(const std::function<void()>& f) { commands_.run_sync(f); }

uint64_t FlowEngine::now_us() const {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

void FlowEngine::loop() {
  uint64_t last_progress = now_us();
  while (running_.load(std::memory_order_relaxed)) {
    heartbeat_.busy(++passes_);
    bool progress = commands_.drain();
    progress |= poll_flows();
    progress |= poll_cqs();
    const uint64_t now = now_us();
    for (auto& p : peers_) {
      if (!p) continue;
      p->balancer->tick(now);
      for (uint16_t nic : p->balancer->take_path_checks()) check_path(*p, nic);
      progress |= plan_and_post(*p);
    }
    if (now - last_weights_us_ >= 100'000) {
      last_weights_us_ = now;
      publish_weights();
    }
    if (progress) {
      last_progress = now;
      idle_sleeps_ = 0;
      continue;
    }
    if (now - last_progress < kSpinUs) {
      // Past the first microseconds of the spin, give the CPU away on every idle pass: the thread
      // that makes our next progress (the client polling its completion, a soft NIC's datapath)
      // may be queued on this CPU, and a plain spin would delay it by the whole spin when there
      // are fewer free cores than busy threads. Not at once: a syscall per pass would add its
      // cost to a busy flow's back-to-back requests.
      if (now - last_progress >= kSpinBeforeYieldUs) std::this_thread::yield();
      continue;
    }
    heartbeat_.idle(passes_);  // waiting for work by choice: never a stall, however long
    sleep_until_work(in_flight_ > 0 || mail_unacked_ > 0);
  }
  heartbeat_.idle(passes_);
}

void FlowEngine::sleep_until_work(bool in_flight) {
  // Sleep until a completion too: arm every CQ, then look once more (a completion that came
  // before the arming raises no event). Even with nothing in flight: a peer's lane mail (a receive
  // it advertised) must be taken and its inbox slot posted again, or the peer's next SENDs on that
  // QP, and the one-sided requests behind them, wait in RNR retries while we sleep. With work in
  // flight the timed slice below stays, for the balancer's deadlines; a CQ without notification
  // is only seen when it ends.
  std::vector<pollfd>& fds = pollfds_;
  fds.clear();
  fds.push_back({wake_fd_, POLLIN, 0});
  notify_cqs_.clear();
  for (uint16_t nic = 0; nic < cqs_.size(); ++nic) {
    if (cqs_[nic] == nullptr || !cqs_[nic]->request_notify().ok()) continue;
    fds.push_back({cqs_[nic]->notify_fd(), POLLIN, 0});
    notify_cqs_.push_back(nic);
  }
  if (poll_cqs()) return;
  const size_t cq_fds_end = fds.size();
  // Announce sleep on every flow, then look once more (ring::prepare_sleep): a request committed
  // after this sees the flag and rings the doorbell.
  for (auto& [id, f] : flows_) {
    if (f->failed) continue;
    if (ring::prepare_sleep(f->header->daemon_idle, f->header->sq_tail, f->sq.head())) return;
    f->sleeping = true;
    fds.push_back({f->setup.doorbell_fd, POLLIN, 0});
  }
  bool recovering = false;
  for (auto& p : peers_) {
    if (!p) continue;
    for (uint16_t i = 0; i < p->lanes.size(); ++i)
      recovering |= p->balancer->state(i) == balancer::LaneState::kRecovering;
  }
  const int64_t slice = std::min(kInFlightSleepMaxNs, kInFlightSleepNs << std::min(idle_sleeps_, 8u));
  ++idle_sleeps_;
  timespec ts{0, slice};
  if (!in_flight && recovering) ts = timespec{0, 10'000'000};  // rejoin checks
  base::trace::mark(base::trace::Point::kEngineSleeps);
  ::ppoll(fds.data(), fds.size(), (in_flight || recovering) ? &ts : nullptr, nullptr);
  base::trace::mark(base::trace::Point::kEngineWakes);
  uint64_t v;
  for (size_t i = 0; i < fds.size(); ++i) {
    if ((fds[i].revents & POLLIN) == 0) continue;
    if (i > 0 && i < cq_fds_end) {
      cqs_[notify_cqs_[i - 1]]->ack_notify();
    } else {
      (void)!::read(fds[i].fd, &v, sizeof(v));
    }
  }
  for (auto& [id, f] : flows_) {
    if (f->sleeping) f->header->daemon_idle.store(0, std::memory_order_relaxed);
    f->sleeping = false;
  }
}

void FlowEngine::publish_weights() {
  for (uint16_t i = 0; i < lane_counters_.size(); ++i) {
    double sum = 0;
    int n = 0;
    for (auto& p : peers_) {
      if (!p) continue;
      sum += p->balancer->weight(i);
      ++n;
    }
    lane_counters_[i]->weight.store(n > 0 ? sum / n : 0, std::memory_order_relaxed);
  }
}

void FlowEngine::publish_lane_qps(uint16_t nic) {
  uint32_t qps = 0;
  for (auto& p : peers_) {
    if (p && nic < p->lanes.size() && !p->lanes[nic].dead) qps = std::max<uint32_t>(qps, p->lanes[nic].qp_count);
  }
  lane_counters_[nic]->lane_qps.store(qps, std::memory_order_relaxed);
}

FlowEngine::Peer* FlowEngine::find_peer(const std::string& name) {
  for (auto& p : peers_)
    if (p && p->name == name) return p.get();
  return nullptr;
}

void FlowEngine::add_flow(const FlowSetup& setup) {
  auto f = std::make_unique<Flow>();
  f->setup = setup;
  f->header = static_cast<ring::Header*>(setup.ring);
  const ring::Layout l = ring::layout_for(setup.sq_depth, setup.cq_depth);
  f->sq = ring::Consumer<ring::Sqe>(ring::sq_slots(setup.ring, l), setup.sq_depth, &f->header->sq_tail,
                                    &f->header->sq_head);
  f->cq = ring::Producer<ring::Cqe>(ring::cq_slots(setup.ring, l), setup.cq_depth, &f->header->cq_tail,
                                    &f->header->cq_head);
  f->peer = find_peer(setup.peer);
  f->header->flow_state.store(static_cast<uint32_t>(f->peer ? ring::FlowState::kConnected : ring::FlowState::kConnecting));
  if (f->peer) f->peer->flows.push_back(f.get());
  flows_.emplace(setup.id, std::move(f));
  counters_.flows_open.store(flows_.size(), std::memory_order_relaxed);
}

void FlowEngine::remove_flow(uint64_t flow_id) {
  auto it = flows_.find(flow_id);
  if (it == flows_.end()) return;
  Flow& f = *it->second;
  // Its transfers become orphans: nothing more is planned; those with chunks in flight are freed
  // when the last one completes (the NIC may still be touching their memory), the others now.
  std::vector<Transfer*> now_free;
  for (auto& t : transfers_) {
    if (!t || t->flow != &f) continue;
    t->flow = nullptr;
    t->status = RDMAD_ERR_CONNECTION;
    t->chunks_total = t->chunks_planned;
    if (t->chunks_done == t->chunks_planned) now_free.push_back(t.get());
  }
  for (auto& p : peers_) {
    if (!p) continue;
    std::erase(p->flows, &f);
    std::erase_if(p->planning, [](Transfer* t) { return t->flow == nullptr; });
    for (auto& [ch, q] : p->waiting_sends) std::erase_if(q, [](Transfer* t) { return t->flow == nullptr; });
  }
  for (Transfer* t : now_free) free_transfer(t);
  flows_.erase(it);
  counters_.flows_open.store(flows_.size(), std::memory_order_relaxed);
}

void FlowEngine::add_import(uint64_t flow_id, uint64_t remote_handle, const RemoteRange& range) {
  auto it = flows_.find(flow_id);
  if (it != flows_.end()) it->second->imports[remote_handle] = range;
}

void FlowEngine::prune_awaiting(uint64_t flow_id) {
  auto it = flows_.find(flow_id);
  if (it != flows_.end()) std::erase_if(it->second->imports, [](const auto& kv) { return kv.second.awaiting_grant; });
}

void FlowEngine::drop_token(const Token& token) {
  for (auto& [id, f] : flows_) std::erase_if(f->imports, [&](const auto& kv) { return kv.second.token == token; });
}

namespace {

void await_grants_of(std::map<uint64_t, RemoteRange>& imports) {
  for (auto& [handle, range] : imports) {
    RemoteRange awaiting;
    awaiting.token = range.token;
    awaiting.awaiting_grant = true;
    range = awaiting;  // no keys of the old session survive
  }
}

}  // namespace

void FlowEngine::await_grants(const std::string& name) {
  for (auto& [id, f] : flows_)
    if (f->setup.peer == name) await_grants_of(f->imports);
}

void FlowEngine::peer_ready(const std::string& name, const std::vector<std::vector<verbs::QueuePair*>>& qps,
                            const PeerDomain* domain, uint32_t session) {
  if (find_peer(name) != nullptr) peer_lost(name);
  size_t slot = 0;
  while (slot < peers_.size() && peers_[slot]) ++slot;
  if (slot >= kMailTag) {  // the last slot's value tags mailbox work requests
    flow_log()->error("peer not served peer={} reason=over_255_peers", name);
    return;
  }
  if (slot == peers_.size()) peers_.emplace_back();
  auto p = std::make_unique<Peer>();
  p->name = name;
  p->slot = static_cast<uint8_t>(slot);
  p->gen = next_peer_gen_++;
  p->session = session;
  p->ready_us = now_us();
  p->domain = domain;
  std::vector<balancer::NicSpec> specs;
  for (const auto& n : nic_names_) specs.push_back({n});
  balancer::BalancerConfig bc = options_.balancer;
  bc.max_in_flight_chunks = 4096;
  bc.check_path_before_rejoin = true;
  p->balancer = std::make_unique<balancer::Balancer>(bc, std::move(specs));
  p->chunks.resize(bc.max_in_flight_chunks);
  p->lanes.resize(nic_names_.size());
  const uint64_t now = now_us();
  for (uint16_t i = 0; i < p->lanes.size(); ++i) {
    auto& lane = p->lanes[i];
    if (i < qps.size()) lane.set_qps(qps[i]);
    lane.dead = lane.qp_count == 0;
    if (lane.dead) p->balancer->mark_down(i, now, "no queue pair to this peer");
  }
  Peer* raw = p.get();
  peers_[slot] = std::move(p);
  for (uint16_t i = 0; i < raw->lanes.size(); ++i)
    if (!raw->lanes[i].dead && open_mailbox(*raw, i)) {
      // Checked before its first chunk, as before a rejoin: a path broken already when the session
      // starts then costs no chunk a retry timeout (Balancer::check_first).
      raw->balancer->check_first(i, now);
    }
  for (uint16_t i = 0; i < nic_names_.size(); ++i) publish_lane_qps(i);
  for (auto& [id, f] : flows_) {
    if (f->setup.peer != name) continue;
    f->peer = raw;
    raw->flows.push_back(f.get());
    f->header->flow_state.store(static_cast<uint32_t>(ring::FlowState::kConnected));
  }
}

void FlowEngine::peer_lost(const std::string& name) {
  Peer* p = find_peer(name);
  if (p == nullptr) return;
  fail_peer_transfers(*p, RDMAD_ERR_PEER);
  for (auto& lane : p->lanes)  // for receives and sends that fail with the peer anyway
    for (auto& q : lane.qps) mail_unacked_ -= q.outbox.size();
  for (Flow* f : p->flows) {
    f->peer = nullptr;
    await_grants_of(f->imports);  // the grants died with the session; the peer grants them again
    f->header->flow_state.store(static_cast<uint32_t>(ring::FlowState::kDisconnected));
    progress(*f);
  }
  peers_[p->slot].reset();
  for (uint16_t i = 0; i < nic_names_.size(); ++i) publish_lane_qps(i);
}

void FlowEngine::lane_replacing(const std::string& name, uint16_t nic, peer::RebuildCause cause) {
  Peer* p = find_peer(name);
  if (p == nullptr || nic >= p->lanes.size()) return;
  // Mail the old QPs placed, taken before they go (a provider may drop a destroyed QP's
  // completions from the CQ; flow_mailbox.cc).
  poll_cqs();
  // A lane this side failed already (it started the rebuild) keeps its own verdict.
  lane_failed(*p, nic,
              cause == peer::RebuildCause::kRequestRefused
                  ? "queue pair replaced by the peer after a refused request"
                  : "queue pair replaced by the peer after a path fault",
              lane_fault(cause));
  p->lanes[nic].set_qps({});
}

void FlowEngine::nic_down(uint16_t nic, const std::string& reason) {
  for (auto& p : peers_)
    if (p && nic < p->lanes.size()) lane_failed(*p, nic, reason);
}

void FlowEngine::qp_failed(uint16_t nic, uint32_t qp_num) {
  for (auto& p : peers_) {
    if (!p || nic >= p->lanes.size()) continue;
    auto& lane = p->lanes[nic];
    // One QP of the lane failed: the whole lane fails over (its other QPs with it).
    if (!lane.dead && lane.find_qp(qp_num) != nullptr)
      lane_failed(*p, nic, "queue pair failed (asynchronous QP fatal event)");
  }
}

void FlowEngine::set_cq(uint16_t nic, verbs::CompletionQueue* cq) {
  if (nic < cqs_.size()) cqs_[nic] = cq;
}

void FlowEngine::set_congestion(uint16_t nic, double cnp_per_s, double rate_mbps) {
  for (auto& p : peers_)
    if (p && nic < p->lanes.size()) p->balancer->set_congestion(nic, cnp_per_s, rate_mbps);
}

void FlowEngine::lane_rebuilt(const std::string& name, uint16_t nic, const std::vector<verbs::QueuePair*>& qps) {
  Peer* p = find_peer(name);
  if (p == nullptr || nic >= p->lanes.size() || qps.empty()) return;
  auto& lane = p->lanes[nic];
  lane.set_qps(qps);  // all of the lane's QPs are fresh: they were rebuilt together
  ++lane.epoch;
  lane.dead = false;
  publish_lane_qps(nic);
  lane.backlog.clear();
  if (!open_mailbox(*p, nic)) return;  // failed again: rebuilt again
  p->balancer->mark_recovered(nic, now_us());
}

}  // namespace rdmad::flow
