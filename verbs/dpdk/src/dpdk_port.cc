// Opening and closing a dpdk port: probe, configure, mbuf pool, queues, rings, start; and the
// port-wide facts (link, MTU, offloads).
#include "dpdk_port.h"

#include <rte_alarm.h>
#include <rte_dev.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_ring.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <map>
#include <thread>

#include "eal.h"
#include "rdmad/base/log.h"
#include "rdmad/base/log_fields.h"

namespace rdmad::verbs::dpdk {
namespace {

// Ports some NIC of this process uses: two NICs on one port would configure it twice.
std::mutex g_ports_mu;
std::map<uint16_t, DpdkPort*> g_ports;
// One port closes at a time (pause_for_close looks at the others).
std::mutex g_close_mu;
std::atomic<uint32_t> g_pool_seq{0};
// Which port each open dpdk Device has, for port_counters; a port leaves before it closes.
std::mutex g_devices_mu;
std::map<const Device*, const DpdkPort*> g_devices;

std::string dpdk_error(int rc) { return rte_strerror(rc < 0 ? -rc : rc); }

// PMDs that have copied a frame into their own ring when rte_eth_tx_burst returns, so a payload
// attached in place is read only during the call. Real NICs DMA later (and net_ring passes the
// mbuf itself on): those get the payload copied.
bool driver_memif(const std::string& devargs) { return devargs.rfind("net_memif", 0) == 0; }

// memif's slots are 2048 bytes and its rings 1024 slots unless devargs say otherwise: a frame of a
// 4096-byte RoCE path MTU then takes three chained slots, and a ring holds a third of one QP's 1 MiB
// window, so a datapath that naps a millisecond lost packets by the hundred (two daemons moved 3 MB/s
// with hundreds of retransmit timeouts). Unless given: one slot per frame of any path MTU (4352
// bytes), 4096 slots.
std::string with_memif_defaults(const std::string& devargs) {
  if (!driver_memif(devargs)) return devargs;
  std::string out = devargs;
  if (out.find(",bsize=") == std::string::npos) out += ",bsize=4352";
  if (out.find(",rsize=") == std::string::npos) out += ",rsize=12";
  return out;
}

// The socket both ends of a memif link name (memif's default where devargs names none).
std::string memif_socket(const std::string& devargs) {
  const size_t at = devargs.find(",socket=");
  if (at == std::string::npos) return "/run/memif.sock";
  const size_t start = at + 8;
  return devargs.substr(start, devargs.find(',', start) - start);
}

// Waits until `done` (bounded); false at the deadline.
template <class Done>
bool wait_until(Done done, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!done()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::yield();
  }
  return true;
}

void set_flag(void* flag) { static_cast<std::atomic<bool>*>(flag)->store(true); }

// Returns once the EAL's interrupt thread has finished what it was doing (an alarm runs on it,
// between two of its callbacks).
void interrupt_thread_barrier() {
  std::atomic<bool> done{false};
  if (rte_eal_alarm_set(1, set_flag, &done) != 0) return;
  if (!wait_until([&] { return done.load(); }, std::chrono::seconds(2))) rte_eal_alarm_cancel(set_flag, &done);
}

bool copies_at_tx(const std::string& driver, const std::string& devargs) {
  if (driver == "net_af_packet") return true;
  // memif's zero-copy mode (a client's zero-copy=yes) hands mbufs over instead.
  return driver == "net_memif" && devargs.find("zero-copy=yes") == std::string::npos;
}

}  // namespace

uint32_t roce_mtu_for_ip_mtu(uint32_t ip_mtu, bool v6) {
  // IP + UDP + BTH + RETH + ImmDt + ICRC around the payload (a WRITE-only-with-immediate).
  const uint32_t overhead = (v6 ? 40 : 20) + 8 + 12 + 16 + 4 + 4;
  for (uint32_t mtu = 4096; mtu > 256; mtu /= 2)
    if (mtu + overhead <= ip_mtu) return mtu;
  return 256;
}

Result<std::unique_ptr<DpdkPort>> DpdkPort::open(const DpdkPortConfig& config, const engine::PortSteering& steering) {
  std::unique_ptr<DpdkPort> port(new DpdkPort());
  const Status st = port->start(config, steering);
  if (!st.ok()) return st;
  return port;
}

Status DpdkPort::start(const DpdkPortConfig& c, const engine::PortSteering& steering) {
  PortShared& s = *shared_;
  auto ip = parse_ip(c.address);
  if (!ip) return Status::error("dpdk nic: bad address '" + c.address + "'");
  if (ip->v6 && std::all_of(ip->bytes.begin(), ip->bytes.begin() + 10, [](uint8_t b) { return b == 0; }) &&
      ip->bytes[10] == 0xff && ip->bytes[11] == 0xff) {
    // ::ffff:a.b.c.d is the IPv4 address (the engine's GIDs say IPv4 that way)
    roce::IpAddr v4;
    std::copy(ip->bytes.begin() + 12, ip->bytes.end(), v4.bytes.begin());
    ip = v4;
  }
  s.local.ip = *ip;
  s.local.udp_port = c.udp_port;
  s.steering = steering;
  if (!c.gateway.empty()) {
    s.gateway = parse_ip(c.gateway);
    if (!s.gateway || s.gateway->v6 != ip->v6) {
      return Status::error("dpdk nic: option gateway: '" + c.gateway + "' is not an address of the nic's family");
    }
  }
  auto fixed = parse_neighbors(c.neighbors);
  if (!fixed.ok()) return Status::error("dpdk nic: option neighbors: " + fixed.status().message());
  for (const auto& [nip, mac] : fixed.value()) {
    if (nip.v6 != ip->v6) return Status::error("dpdk nic: option neighbors: " + ip_string(nip) + " is of the other family");
    const Status added = s.neighbors.add_static(nip, mac);
    if (!added.ok()) return Status::error("dpdk nic: option neighbors: " + added.message());
  }
  if (c.devargs.empty()) return Status::error("dpdk nic: option devargs is required (the port to use, e.g. a PCI address)");
  if (const Status eal = ensure_eal(c.eal_args); !eal.ok()) return eal;

  name_ = c.devargs.substr(0, c.devargs.find(','));
  const std::string devargs = with_memif_defaults(c.devargs);
  uint16_t existing = 0;
  // A port already there (probed by the EAL's -a, or a memif server a closed NIC left) is used.
  const int probed = rte_eth_dev_get_port_by_name(name_.c_str(), &existing) == 0 ? -EEXIST
                                                                                 : rte_dev_probe(devargs.c_str());
  if (probed < 0 && probed != -EEXIST) {
    return Status::error("dpdk nic: option devargs: rte_dev_probe(\"" + devargs + "\") failed: " + dpdk_error(probed));
  }
  uint16_t pid = 0;
  if (rte_eth_dev_get_port_by_name(name_.c_str(), &pid) != 0) {
    return Status::error("dpdk nic: option devargs: no ethdev port named '" + name_ + "' after probing \"" + c.devargs + "\"");
  }
  s.port_id = pid;
  {
    std::lock_guard lock(g_ports_mu);
    if (!g_ports.emplace(pid, this).second) {
      return Status::error("dpdk nic: option devargs: port '" + name_ + "' is already another dpdk nic's");
    }
    registered_ = true;
  }
  if (driver_memif(c.devargs)) memif_socket_ = memif_socket(c.devargs);
  // From here on the destructor releases the port, and removes what we probed. Not a memif server:
  // DPDK 22.11's memif frees its listener's interrupt handle on removal without unregistering it,
  // and the EAL's interrupt thread then reads freed memory (it crashed 3 test processes in 100).
  // Such a port is stopped and stays for the life of the process; the same devargs opens it again.
  probed_ = probed == 0 && !(driver_memif(c.devargs) && c.devargs.find("role=client") == std::string::npos);

  rte_eth_dev_info info{};
  if (int rc = rte_eth_dev_info_get(pid, &info); rc != 0) return Status::error("dpdk nic " + name_ + ": rte_eth_dev_info_get: " + dpdk_error(rc));
  driver_ = info.driver_name != nullptr ? info.driver_name : "";
  const uint16_t queues = static_cast<uint16_t>(steering.queues);
  if (queues > info.max_rx_queues || queues > info.max_tx_queues) {
    return Status::error("dpdk nic " + name_ + ": datapath_threads = " + std::to_string(queues) + " needs as many queues, " +
                         driver_ + " has " + std::to_string(std::min(info.max_rx_queues, info.max_tx_queues)) +
                         " (net_af_packet: qpairs=N in devargs)");
  }

  rte_eth_conf conf{};
  const bool multi_seg = (info.tx_offload_capa & RTE_ETH_TX_OFFLOAD_MULTI_SEGS) != 0;
  if (multi_seg) conf.txmode.offloads |= RTE_ETH_TX_OFFLOAD_MULTI_SEGS;
  if (queues > 1 && info.flow_type_rss_offloads != 0) {
    conf.rxmode.mq_mode = RTE_ETH_MQ_RX_RSS;
    conf.rx_adv_conf.rss_conf.rss_hf = (RTE_ETH_RSS_IP | RTE_ETH_RSS_UDP) & info.flow_type_rss_offloads;
  }
  conf.intr_conf.rxq = c.rx_interrupts ? 1 : 0;
  int rc = rte_eth_dev_configure(pid, queues, queues, &conf);
  if (rc != 0 && conf.intr_conf.rxq != 0) {
    conf.intr_conf.rxq = 0;
    rc = rte_eth_dev_configure(pid, queues, queues, &conf);
  }
  if (rc != 0) return Status::error("dpdk nic " + name_ + ": rte_eth_dev_configure: " + dpdk_error(rc));

  uint32_t ip_mtu = c.mtu;
  if (c.mtu != 0) {
    if (int m = rte_eth_dev_set_mtu(pid, static_cast<uint16_t>(c.mtu)); m != 0) {
      // net_memif has no MTU to set and net_af_packet says 1500 whatever its interface carries:
      // the option states what the link carries.
      log::get(log::Component::kVerbs)
          ->info("dpdk nic mtu taken as given port={} driver={} mtu={} error={}", name_, driver_, c.mtu,
                 base::q(dpdk_error(m)));
    }
  } else {
    uint16_t m = 0;
    ip_mtu = rte_eth_dev_get_mtu(pid, &m) == 0 ? m : 1500;
  }
  link_mtu_ = roce_mtu_for_ip_mtu(ip_mtu, ip->v6);

  uint16_t nb_rx = static_cast<uint16_t>(c.descriptors), nb_tx = static_cast<uint16_t>(c.descriptors);
  if (int a = rte_eth_dev_adjust_nb_rx_tx_desc(pid, &nb_rx, &nb_tx); a != 0) {
    return Status::error("dpdk nic " + name_ + ": option descriptors: " + dpdk_error(a));
  }
  int socket = rte_eth_dev_socket_id(pid);
  if (socket < 0) socket = SOCKET_ID_ANY;
  const std::string pool_name = "rdmad" + std::to_string(pid) + "_" + std::to_string(g_pool_seq.fetch_add(1));
  // Each mbuf's private area holds the shared info of a payload attached to it in place.
  const auto priv = static_cast<uint16_t>(RTE_ALIGN(sizeof(rte_mbuf_ext_shared_info), RTE_MBUF_PRIV_ALIGN));
  s.pool = rte_pktmbuf_pool_create(pool_name.c_str(), c.mbufs, std::min(256u, c.mbufs / 4), priv,
                                   RTE_PKTMBUF_HEADROOM + kFrameRoom, socket);
  if (s.pool == nullptr) {
    return Status::error("dpdk nic " + name_ + ": option mbufs: rte_pktmbuf_pool_create(" + std::to_string(c.mbufs) +
                         " mbufs) failed: " + rte_strerror(rte_errno) + " (more memory: -m in eal_args)");
  }
  for (uint16_t q = 0; q < queues; ++q) {
    if (int r = rte_eth_rx_queue_setup(pid, q, nb_rx, static_cast<unsigned>(socket), nullptr, s.pool); r != 0) {
      return Status::error("dpdk nic " + name_ + ": rte_eth_rx_queue_setup: " + dpdk_error(r));
    }
    if (int r = rte_eth_tx_queue_setup(pid, q, nb_tx, static_cast<unsigned>(socket), nullptr); r != 0) {
      return Status::error("dpdk nic " + name_ + ": rte_eth_tx_queue_setup: " + dpdk_error(r));
    }
  }

  rte_ether_addr mac{};
  if (int r = rte_eth_macaddr_get(pid, &mac); r != 0) return Status::error("dpdk nic " + name_ + ": rte_eth_macaddr_get: " + dpdk_error(r));
  std::memcpy(s.local.mac.data(), mac.addr_bytes, 6);
  if (!c.mac.empty()) {
    const auto want = parse_mac(c.mac);
    if (!want) return Status::error("dpdk nic: option mac: '" + c.mac + "' is not a MAC address");
    s.local.mac = *want;
    std::memcpy(mac.addr_bytes, want->data(), 6);
    // A port that cannot take another address must at least hear frames sent to it.
    if (rte_eth_dev_default_mac_addr_set(pid, &mac) != 0) rte_eth_promiscuous_enable(pid);
  }
  if (ip->v6) rte_eth_allmulticast_enable(pid);  // solicited-node multicast: neighbour solicitations

  if (int r = rte_eth_dev_start(pid); r != 0) return Status::error("dpdk nic " + name_ + ": rte_eth_dev_start: " + dpdk_error(r));
  started_ = true;

  // Rx interrupts where the PMD has them (rte_eth_dev_rx_intr_enable says ENOTSUP quietly when not).
  std::vector<int> intr_fds(queues, -1);
  bool interrupts = conf.intr_conf.rxq != 0 && rte_eth_dev_rx_intr_enable(pid, 0) == 0;
  if (interrupts) {
    rte_eth_dev_rx_intr_disable(pid, 0);
    for (uint16_t q = 0; q < queues && interrupts; ++q) {
      intr_fds[q] = rte_eth_dev_rx_intr_ctl_q_get_fd(pid, q);
      interrupts = intr_fds[q] >= 0;
    }
  }
  s.rx_interrupts = interrupts;
  s.zero_copy_tx = c.zero_copy_tx && multi_seg && copies_at_tx(driver_, c.devargs);
  s.idle_poll_ns = int64_t{c.idle_poll_us} * 1000;
  s.idle_poll_max_ns = std::max<int64_t>(s.idle_poll_ns, int64_t{c.idle_poll_max_us} * 1000);
  s.resolver = std::make_unique<NeighborResolver>(s.local, s.neighbors);
  for (uint16_t q = 0; q < queues; ++q) {
    rte_ring* ring = nullptr;
    if (queues > 1) {
      const std::string ring_name = pool_name + "q" + std::to_string(q);
      ring = rte_ring_create(ring_name.c_str(), 1024, socket, RING_F_SC_DEQ);
      if (ring == nullptr) return Status::error("dpdk nic " + name_ + ": rte_ring_create: " + rte_strerror(rte_errno));
      rings_.push_back(ring);
    }
    queues_.push_back(std::make_unique<DpdkQueue>(s, q, ring, interrupts ? intr_fds[q] : -1));
    s.queues.push_back(queues_.back().get());
  }
  log::get(log::Component::kVerbs)
      ->info("dpdk nic port opened port={} driver={} mac={} address={} queues={} mtu={} rx_interrupts={} "
             "payload_in_place={}",
             name_, driver_, mac_string(s.local.mac), c.address, queues, link_mtu_, interrupts, s.zero_copy_tx);
  return Status::success();
}

void remember_device(const Device& dev, const DpdkPort& port) {
  std::lock_guard lock(g_devices_mu);
  g_devices[&dev] = &port;
}

std::optional<PortCounters> port_counters(const Device& dev) {
  std::lock_guard lock(g_devices_mu);
  const auto it = g_devices.find(&dev);
  if (it == g_devices.end()) return std::nullopt;
  return it->second->counters();
}

// DPDK 22.11's memif frees a link's shared memory in the EAL's interrupt thread when it hears
// that the peer went away, while that side's datapath may be copying to or from it inside
// rx/tx_burst (a crash, 3 in 100 of the verbs tests' in-process pairs). Where the peer is a port
// of this process, its queues stay out of the PMD from before this end closes until its
// interrupt thread has handled the disconnect. A peer in another process that disconnects under
// traffic is not covered (docs/verbs.md, "The dpdk backend").
void DpdkPort::pause_for_close(bool pause) {
  if (memif_socket_.empty()) return;
  std::vector<DpdkPort*> peers;
  {
    std::lock_guard lock(g_ports_mu);
    for (const auto& [id, p] : g_ports)
      if (p != this && p->memif_socket_ == memif_socket_ && !p->queues_.empty()) peers.push_back(p);
  }
  for (DpdkPort* p : peers) {
    if (pause) {
      p->shared_->paused.store(true, std::memory_order_seq_cst);
      for (const auto& q : p->queues_) wait_until([&] { return !q->in_pmd(); }, std::chrono::seconds(1));
    } else {
      wait_until([&] { return !p->link_up(); }, std::chrono::seconds(2));
      interrupt_thread_barrier();
      p->shared_->paused.store(false, std::memory_order_seq_cst);
    }
  }
}

DpdkPort::~DpdkPort() {
  std::lock_guard close_lock(g_close_mu);
  {
    std::lock_guard lock(g_devices_mu);
    std::erase_if(g_devices, [this](const auto& d) { return d.second == this; });
  }
  PortShared& s = *shared_;
  // The queues hand their mbufs back before the port and the pool go.
  s.queues.clear();
  queues_.clear();
  pause_for_close(true);
  if (started_) rte_eth_dev_stop(s.port_id);
  if (probed_) {
    rte_eth_dev_info info{};
    rte_device* dev = rte_eth_dev_info_get(s.port_id, &info) == 0 ? info.device : nullptr;
    rte_eth_dev_close(s.port_id);
    if (dev != nullptr) {
      if (int rc = rte_dev_remove(dev); rc != 0) {
        log::get(log::Component::kVerbs)->warn("dpdk nic port not removed port={} error={}", name_, base::q(dpdk_error(rc)));
      }
    }
  }
  pause_for_close(false);
  if (registered_) {
    std::lock_guard lock(g_ports_mu);
    g_ports.erase(s.port_id);
  }
  for (rte_ring* r : rings_) rte_ring_free(r);
  if (s.pool != nullptr) rte_mempool_free(s.pool);
}

engine::PortOffloads DpdkPort::offloads() const {
  engine::PortOffloads o;
  o.segmentation = false;
  o.receive_coalescing = false;
  o.ip_id_visible = true;  // the port parses each frame's IPv4 header
  o.payload_in_place = shared_->zero_copy_tx;
  return o;
}

bool DpdkPort::link_up() const {
  rte_eth_link link{};
  return rte_eth_link_get_nowait(shared_->port_id, &link) == 0 && link.link_status == RTE_ETH_LINK_UP;
}

uint64_t DpdkPort::rx_overflow_drops() const {
  // The PMD's: frames its rx rings had no descriptor for, or no mbuf (imissed, rx_nombuf); ours:
  // packets for another queue's QP that its hand-over ring had no room for.
  rte_eth_stats st{};
  uint64_t n = rte_eth_stats_get(shared_->port_id, &st) == 0 ? st.imissed + st.rx_nombuf : 0;
  return n + counters().handoff_drops;
}

PortCounters DpdkPort::counters() const {
  PortCounters c;
  for (const auto& q : queues_) q->add_counters(c);
  return c;
}

}  // namespace rdmad::verbs::dpdk
