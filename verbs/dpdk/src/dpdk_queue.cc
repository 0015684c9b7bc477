// One dpdk queue: frames built around the engine's datagrams into mbufs (the payload attached in
// place where the PMD copies at tx_burst, else copied), received frames classified and handed out
// or over, ARP/ND answered, and the owner's sleep (rx interrupts, or polling that backs off).
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_ring.h>
#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cstring>

#include "dpdk_port.h"

namespace rdmad::verbs::dpdk {
namespace {

// A payload attached in place belongs to a memory region: nothing to free when the mbuf goes.
void keep_payload(void*, void*) {}

void drain(int fd) {
  uint64_t v;
  while (fd >= 0 && read(fd, &v, sizeof v) > 0) {
  }
}

// Naps of a polled queue double every this many naps without a packet, from idle_poll_us up to
// idle_poll_max_us.
constexpr uint32_t kNapsPerStep = 8;

}  // namespace

DpdkQueue::DpdkQueue(PortShared& port, uint16_t index, rte_ring* ring, int intr_fd)
    : port_(port),
      index_(index),
      ring_(ring),
      intr_fd_(intr_fd),
      slot_(std::make_unique<uint8_t[]>(engine::kTxSlotBytes)),
      linear_(std::make_unique<uint8_t[]>(kRxMax * kFrameRoom)) {
  if (intr_fd_ >= 0) {
    // after_sleep drains it without blocking (the PMD's eventfd; nothing else reads it).
    fcntl(intr_fd_, F_SETFL, fcntl(intr_fd_, F_GETFL) | O_NONBLOCK);
    event_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
    epoll_event ev{};
    ev.events = EPOLLIN;
    epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, intr_fd_, &ev);
    epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, event_fd_, &ev);
  }
}

DpdkQueue::~DpdkQueue() {
  rte_pktmbuf_free_bulk(tx_, static_cast<unsigned>(tx_count_));
  rte_pktmbuf_free_bulk(held_, static_cast<unsigned>(held_count_));
  rte_pktmbuf_free_bulk(stash_, static_cast<unsigned>(stash_count_));
  if (ring_ != nullptr) {
    void* m;
    while (rte_ring_sc_dequeue(ring_, &m) == 0) rte_pktmbuf_free(static_cast<rte_mbuf*>(m));
  }
  if (epoll_fd_ >= 0) close(epoll_fd_);
  if (event_fd_ >= 0) close(event_fd_);
}

Result<uint32_t> DpdkQueue::open_path(const engine::PathRequest& r, roce::IpUdpInfo* ip) {
  if (r.dst.v6 != port_.local.ip.v6) return Status::error("dpdk nic: peer address family differs from the nic's");
  // A static neighbour is reached directly; everyone else through the gateway when there is one.
  NeighborTable::Entry* neighbor = port_.neighbors.find(r.dst);
  if (neighbor == nullptr || !neighbor->fixed) neighbor = port_.neighbors.add(port_.gateway.value_or(r.dst));
  if (neighbor == nullptr) return Status::no_resource("dpdk nic: neighbour table full");
  const uint32_t id = paths_.open();
  ip->src = port_.local.ip;
  ip->dst = r.dst;
  ip->src_port = source_port_for(r.qpn, r.dest_qpn);
  ip->dst_port = r.dst_port;
  // IPv6: the same entropy in the flow label, which ECMP hashes on IPv6 fabrics (the ICRC masks it).
  ip->flow_label = ip->src.v6 ? (uint32_t{ip->src_port} * 0x9E37u) & 0xFFFFF : 0;
  Path& p = paths_[id];
  p.neighbor = neighbor;
  p.mac_bits = neighbor->mac.load(std::memory_order_acquire);
  p.header = make_path_header(port_.local.mac, NeighborTable::unpack(p.mac_bits), *ip);
  if ((p.mac_bits & NeighborTable::kResolved) == 0) request_neighbor(*neighbor);
  return id;
}

void DpdkQueue::close_path(uint32_t path) { paths_.close(path); }

rte_mbuf* DpdkQueue::build(Path& p, size_t head, std::span<const uint8_t> payload, size_t tail, uint8_t tos) {
  const size_t hdr = p.header.size();
  const size_t datagram = head + payload.size() + tail;
  const bool attach = !payload.empty() && port_.zero_copy_tx;
  rte_mbuf* seg[3] = {};
  const unsigned segs = attach ? (tail > 0 ? 3 : 2) : 1;
  if (rte_pktmbuf_alloc_bulk(port_.pool, seg, segs) != 0) {
    no_mbufs_.add();
    return nullptr;
  }
  rte_mbuf* m = seg[0];
  uint8_t* out = rte_pktmbuf_mtod(m, uint8_t*);
  write_frame_header(p.header, datagram, tos, out);
  const uint8_t* slot = slot_.get();
  std::memcpy(out + hdr, slot, head);
  if (p.header.v6) finish_udp6_checksum(out, {{slot, head}, payload, {slot + head, tail}});
  if (!attach) {
    if (!payload.empty()) std::memcpy(out + hdr + head, payload.data(), payload.size());
    std::memcpy(out + hdr + head + payload.size(), slot + head, tail);
    m->data_len = static_cast<uint16_t>(hdr + datagram);
    m->pkt_len = m->data_len;
    return m;
  }
  // The payload rides as an external segment: the PMD reads it inside rte_eth_tx_burst.
  m->data_len = static_cast<uint16_t>(hdr + head);
  rte_mbuf* ext = seg[1];
  auto* shinfo = static_cast<rte_mbuf_ext_shared_info*>(rte_mbuf_to_priv(ext));
  shinfo->free_cb = keep_payload;
  shinfo->fcb_opaque = nullptr;
  rte_mbuf_ext_refcnt_set(shinfo, 1);
  rte_pktmbuf_attach_extbuf(ext, const_cast<uint8_t*>(payload.data()), RTE_BAD_IOVA,
                            static_cast<uint16_t>(payload.size()), shinfo);
  ext->data_len = static_cast<uint16_t>(payload.size());
  ext->pkt_len = ext->data_len;
  m->next = ext;
  if (segs == 3) {
    rte_mbuf* t = seg[2];
    std::memcpy(rte_pktmbuf_mtod(t, uint8_t*), slot + head, tail);
    t->data_len = static_cast<uint16_t>(tail);
    t->pkt_len = t->data_len;
    ext->next = t;
  }
  m->nb_segs = static_cast<uint16_t>(segs);
  m->pkt_len = static_cast<uint32_t>(hdr + datagram);
  return m;
}

void DpdkQueue::tx_commit(uint32_t path, size_t head, std::span<const uint8_t> payload, size_t tail, uint8_t tos) {
  Path& p = paths_[path];
  const uint64_t mac = p.neighbor->mac.load(std::memory_order_acquire);
  if ((mac & NeighborTable::kResolved) == 0) {
    // Lost as on a wire while the peer is being resolved: the engine resends it.
    unresolved_drops_.add();
    request_neighbor(*p.neighbor);
    return;
  }
  if (mac != p.mac_bits) {  // resolved since the path opened, or the peer's MAC moved
    p.mac_bits = mac;
    p.header.set_dst_mac(NeighborTable::unpack(mac));
  }
  if (rte_mbuf* m = build(p, head, payload, tail, tos)) tx_[tx_count_++] = m;
}

bool DpdkQueue::enter_pmd() {
  // Pairs with DpdkPort::pause_for_close: either it sees this queue inside or this sees the pause.
  in_pmd_.store(true, std::memory_order_seq_cst);
  if (!port_.paused.load(std::memory_order_seq_cst)) return true;
  in_pmd_.store(false, std::memory_order_release);
  return false;
}

size_t DpdkQueue::tx_flush() {
  size_t sent = 0;
  if (enter_pmd()) {
    // A PMD may take part of a burst (its ring has room for part); what it refuses twice is lost.
    for (int tries = 0; sent < tx_count_ && tries < 2; ++tries) {
      sent += rte_eth_tx_burst(port_.port_id, index_, tx_ + sent, static_cast<uint16_t>(tx_count_ - sent));
    }
    leave_pmd();
  }
  if (sent < tx_count_) {
    tx_refused_.add(tx_count_ - sent);
    rte_pktmbuf_free_bulk(tx_ + sent, static_cast<unsigned>(tx_count_ - sent));
  }
  tx_count_ = 0;
  return sent;
}

bool DpdkQueue::send_control(std::span<const uint8_t> frame) {
  rte_mbuf* m = rte_pktmbuf_alloc(port_.pool);
  if (m == nullptr) {
    no_mbufs_.add();
    return false;
  }
  std::memcpy(rte_pktmbuf_mtod(m, uint8_t*), frame.data(), frame.size());
  m->data_len = static_cast<uint16_t>(frame.size());
  m->pkt_len = m->data_len;
  uint16_t sent = 0;
  if (enter_pmd()) {
    sent = rte_eth_tx_burst(port_.port_id, index_, &m, 1);
    leave_pmd();
  }
  if (sent == 0) {
    tx_refused_.add();
    rte_pktmbuf_free(m);
  }
  return sent == 1;
}

void DpdkQueue::request_neighbor(NeighborTable::Entry& e) {
  uint8_t frame[kMaxControlFrameBytes];
  const size_t n = port_.resolver->request(e, now_ns(), frame);
  if (n == 0) return;
  if (send_control({frame, n})) {
    neighbor_requests_.add();
  } else {
    NeighborResolver::request_lost(e);
  }
}

void DpdkQueue::on_control(std::span<const uint8_t> frame) {
  PendingReply r;
  r.size = port_.resolver->on_frame(frame, r.frame);
  if (r.size == 0) return;
  neighbor_replies_.add();
  if (!send_control({r.frame.data(), r.size}) && reply_count_ < replies_.size()) replies_[reply_count_++] = r;
}

void DpdkQueue::resend_replies() {
  size_t kept = 0;
  for (size_t i = 0; i < reply_count_; ++i) {
    PendingReply& r = replies_[i];
    if (!send_control({r.frame.data(), r.size}) && ++r.tries < kReplyTries) replies_[kept++] = r;
  }
  reply_count_ = kept;
}

size_t DpdkQueue::accept(rte_mbuf* m, std::span<engine::RxPacket> out, size_t n, engine::RxStats* stats, bool handed) {
  std::span<const uint8_t> frame;
  if (m->nb_segs == 1) {
    frame = {rte_pktmbuf_mtod(m, const uint8_t*), m->data_len};
  } else if (m->pkt_len <= kFrameRoom) {
    // A PMD that chains what one mbuf would hold (memif, at its own buffer size): made contiguous.
    uint8_t* linear = linear_.get() + n * kFrameRoom;
    frame = {linear, m->pkt_len};
    rte_pktmbuf_read(m, 0, m->pkt_len, linear);
  }
  const RxFrame f = classify_frame(frame, port_.local);
  switch (f.kind) {
    case FrameKind::kRoce: {
      const uint32_t owner = port_.steering.queue_of(datagram_dest_qpn(f.datagram));
      if (!handed && owner != index_) {
        port_.queues[owner]->hand_over(m);
        return n;
      }
      out[n] = {f.datagram, f.ip};
      held_[held_count_++] = m;
      return n + 1;
    }
    case FrameKind::kArp:
    case FrameKind::kNeighborDiscovery: on_control(frame); break;
    case FrameKind::kBadIpChecksum: bad_ip_checksum_.add(); break;
    case FrameKind::kOther: break;
  }
  ++stats->not_roce;
  rte_pktmbuf_free(m);
  return n;
}

size_t DpdkQueue::receive(std::span<engine::RxPacket> out, engine::RxStats* stats) {
  if (held_count_ > 0) {
    rte_pktmbuf_free_bulk(held_, static_cast<unsigned>(held_count_));
    held_count_ = 0;
  }
  if (reply_count_ > 0) resend_replies();
  const size_t room = std::min(out.size(), kRxMax);
  size_t n = 0;
  // What before_sleep took off the NIC first, then what other queues handed over, then the NIC.
  size_t i = 0;
  for (; i < stash_count_ && n < room; ++i) n = accept(stash_[i], out, n, stats, false);
  if (i < stash_count_) {
    std::memmove(stash_, stash_ + i, (stash_count_ - i) * sizeof stash_[0]);
    stash_count_ -= i;
    return n;
  }
  stash_count_ = 0;
  rte_mbuf* burst[kRxMax];
  if (ring_ != nullptr && n < room) {
    const unsigned k = rte_ring_sc_dequeue_burst(ring_, reinterpret_cast<void**>(burst), static_cast<unsigned>(room - n), nullptr);
    for (unsigned j = 0; j < k; ++j) n = accept(burst[j], out, n, stats, true);
  }
  if (n < room && enter_pmd()) {
    const uint16_t k = rte_eth_rx_burst(port_.port_id, index_, burst, static_cast<uint16_t>(room - n));
    leave_pmd();
    for (uint16_t j = 0; j < k; ++j) n = accept(burst[j], out, n, stats, false);
  }
  if (n > 0) idle_naps_ = 0;
  return n;
}

void DpdkQueue::hand_over(rte_mbuf* m) {
  if (rte_ring_mp_enqueue(ring_, m) != 0) {
    handoff_drops_.add();
    rte_pktmbuf_free(m);
    return;
  }
  // Pairs with before_sleep: either the owner sees the packet in its ring or this sees it asleep.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (event_fd_ >= 0 && sleeping_.load(std::memory_order_relaxed)) wake();
}

void DpdkQueue::wake() {
  const uint64_t one = 1;
  [[maybe_unused]] ssize_t r = write(event_fd_, &one, sizeof one);
}

int64_t DpdkQueue::poll_interval_ns() const {
  if (epoll_fd_ >= 0) return 0;
  const uint32_t doublings = std::min(idle_naps_ / kNapsPerStep, 16u);
  return std::min(port_.idle_poll_ns << doublings, port_.idle_poll_max_ns);
}

void DpdkQueue::before_sleep() {
  if (epoll_fd_ < 0) {
    ++idle_naps_;
    return;
  }
  sleeping_.store(true, std::memory_order_seq_cst);
  if (enter_pmd()) {
    rte_eth_dev_rx_intr_enable(port_.port_id, index_);
    // A packet that arrived between the last receive and arming raised no interrupt: one more
    // look, and what it finds waits in the stash while the sleep returns at once.
    if (stash_count_ == 0) {
      stash_count_ = rte_eth_rx_burst(port_.port_id, index_, stash_, static_cast<uint16_t>(std::size(stash_)));
    }
    leave_pmd();
  }
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (stash_count_ > 0 || (ring_ != nullptr && rte_ring_count(ring_) > 0)) wake();
}

void DpdkQueue::after_sleep() {
  if (epoll_fd_ < 0) return;
  if (enter_pmd()) {
    rte_eth_dev_rx_intr_disable(port_.port_id, index_);
    leave_pmd();
  }
  sleeping_.store(false, std::memory_order_relaxed);
  drain(intr_fd_);
  drain(event_fd_);
}

void DpdkQueue::add_counters(PortCounters& c) const {
  c.unresolved_drops += unresolved_drops_.get();
  c.tx_refused += tx_refused_.get();
  c.no_mbufs += no_mbufs_.get();
  c.handoff_drops += handoff_drops_.get();
  c.bad_ip_checksum += bad_ip_checksum_.get();
  c.neighbor_requests += neighbor_requests_.get();
  c.neighbor_replies += neighbor_replies_.get();
}

}  // namespace rdmad::verbs::dpdk
