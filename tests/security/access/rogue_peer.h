// A peer daemon that misbehaves: a real peer channel and session (so the victim brings up queue
// pairs with it and grants it what its clients exported to it), one soft NIC, and raw verbs on
// its QPs to try keys and addresses it was never given. Its io_context runs on a thread of its
// own; the test reaches the channel and the session only through on_io().
#pragma once

#include <atomic>
#include <chrono>
#include <cstring>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

#include "integration/peer/peer_test_util.h"
#include "rdmad/daemon/peer/peer_session.h"
#include "rdmad/verbs/soft/soft_backend.h"

namespace rdmad::security {

class RoguePeer {
 public:
  static constexpr size_t kBufferBytes = 1 << 16;

  /// `qps`: run a peer session (queue pairs come up); false: only the channel, which never offers
  /// endpoints, so the victim's session for it never becomes ready.
  RoguePeer(std::string id, const std::string& victim_id, uint16_t victim_port, const std::string& key_file,
            bool qps = true)
      : id_(std::move(id)), victim_(victim_id) {
    registry_.add(verbs::soft::backend_info());
    verbs::DeviceConfig dc;
    dc.name = id_ + "0";
    dc.address = "127.0.0.1";
    dc.backend_options["udp_port"] = 0;
    dc.backend_options["cc_enabled"] = false;
    dev_ = std::move(registry_.open("soft", dc).value());
    pd_ = std::move(dev_->alloc_pd().value());
    scq_ = std::move(dev_->create_cq(256).value());
    rcq_ = std::move(dev_->create_cq(256).value());
    buffer_.assign(kBufferBytes, 0);
    mr_ = std::move(pd_->reg_mr(buffer_.data(), buffer_.size(), verbs::kAccessLocalWrite).value());
    inbox_.assign(size_t{kInboxSlots} * peer::kMailBytes, 0);
    inbox_mr_ = std::move(pd_->reg_mr(inbox_.data(), inbox_.size(), verbs::kAccessLocalWrite).value());

    peer::PeerConfig c = peer::test::config(id_, key_file);
    c.peers.push_back(peer::test::address_of(victim_id, victim_port));
    channel_ = std::make_unique<peer::PeerChannel>(io_, c);
    if (!qps) {
      channel_->set_handlers({
          .on_up = [this](const std::string&, bool) { connected_ = true; },
          .on_down = [this](const std::string&, const std::string&) { connected_ = false; },
          .on_message =
              [this](const std::string&, peer::MessageType type, std::span<const uint8_t> p) {
                if (type != peer::MessageType::kGrantAck) return;
                if (auto a = peer::decode_grant_ack(p)) {
                  std::lock_guard lock(mu_);
                  acks_.push_back(*a);
                }
              },
      });
      start_channel();
      return;
    }
    session_ = std::make_unique<peer::PeerSession>(*channel_, [this](const std::string&) {
      peer::LocalNic l;
      l.name = dev_->info().name;
      l.device = dev_.get();
      l.pd = pd_.get();
      l.send_cq = scq_.get();
      l.recv_cq = rcq_.get();
      peer::QpConnectorOptions o;
      o.qps_per_nic = 1;
      o.timeout = 10;
      o.retry_cnt = 2;
      return std::make_unique<peer::QpConnector>(std::vector<peer::LocalNic>{l}, o);
    });
    session_->set_on_ready([this](const std::string&, peer::QpConnector& q) { set_qp(q.qp(0, 0)); });
    session_->set_on_nic_replacing([this](const std::string&, uint16_t, peer::RebuildCause) { set_qp(nullptr); });
    session_->set_on_nic_rebuilt([this](const std::string&, uint16_t, peer::QpConnector& q) { set_qp(q.qp(0, 0)); });
    session_->set_on_message([this](const std::string& from, peer::MessageType type, std::span<const uint8_t> p) {
      if (type == peer::MessageType::kRecvPost) {
        if (auto r = peer::decode_recv_post(p)) {
          std::lock_guard lock(mu_);
          recv_posts_.push_back(*r);
        }
        return;
      }
      if (type != peer::MessageType::kGrant) return;
      auto g = peer::decode_grant(p);
      if (!g) return;
      {
        std::lock_guard lock(mu_);
        grants_.push_back(*g);
      }
      channel_->send(from, peer::MessageType::kGrantAck, peer::encode(peer::GrantAck{g->token, 0}));
    });
    start_channel();
  }

  ~RoguePeer() {
    on_io([this] {
      if (channel_) channel_->stop();
      session_.reset();
      channel_.reset();
    });
    work_.reset();
    io_.stop();
    thread_.join();
  }

  bool started() const { return started_; }
  bool connected() const { return connected_; }

  /// Sends one frame to the victim (channel-only rogues).
  void send(peer::MessageType type, const std::vector<uint8_t>& payload) {
    on_io([&] { channel_->send(victim_, type, payload); });
  }
  /// Closes the connection and stops redialling.
  void hang_up() {
    on_io([&] { channel_->stop(); });  // stop() reports no on_down
    connected_ = false;
  }
  /// The grant acknowledgements received so far (channel-only rogues).
  std::vector<peer::GrantAck> acks() {
    std::lock_guard lock(mu_);
    return acks_;
  }
  const std::string& start_error() const { return start_error_; }
  const std::string& id() const { return id_; }

  /// Runs f on the rogue's io thread and waits for it.
  void on_io(std::function<void()> f) {
    std::promise<void> done;
    boost::asio::post(io_, [&] {
      f();
      done.set_value();
    });
    done.get_future().wait();
  }

  /// Waits until the victim's QPs and ours are up.
  bool wait_ready(std::chrono::milliseconds deadline) {
    return poll_until([&] { return current_qp() != nullptr; }, deadline);
  }

  /// The grants received so far, in order.
  std::vector<peer::Grant> grants() {
    std::lock_guard lock(mu_);
    return grants_;
  }

  /// The receives the victim advertised to us so far (on the control channel, or as mail on our
  /// lane QP, where we keep receives posted as its peers do), in order.
  std::vector<peer::RecvPost> recv_posts() {
    std::lock_guard lock(mu_);
    verbs::WorkCompletion wc[8];
    for (size_t n; (n = rcq_->poll(wc)) > 0;) {
      for (size_t i = 0; i < n; ++i) {
        if (wc[i].status != verbs::WcStatus::kSuccess || wc[i].opcode != verbs::WcOpcode::kRecv) continue;
        const uint8_t* at = inbox_.data() + wc[i].wr_id * peer::kMailBytes;
        const auto mail = peer::decode_mail({at, std::min<size_t>(wc[i].byte_len, peer::kMailBytes)});
        if (mail && std::holds_alternative<peer::RecvPost>(*mail)) recv_posts_.push_back(std::get<peer::RecvPost>(*mail));
        if (qp_ != nullptr && qp_->qp_num() == wc[i].qp_num) post_inbox(wc[i].wr_id);
      }
    }
    return recv_posts_;
  }

  /// One RC SEND of `bytes` on our lane QP, into a receive the victim keeps posted there (its
  /// send-done mailbox); returns the completion's status.
  verbs::WcStatus send_on_lane(const std::vector<uint8_t>& bytes) {
    std::memcpy(buffer_.data(), bytes.data(), bytes.size());
    return post(verbs::WrOpcode::kSend, 0, 0, static_cast<uint32_t>(bytes.size()));
  }

  /// One RDMA WRITE of `len` bytes of our buffer (filled with `fill`) to (addr, rkey), or one READ
  /// into our buffer; returns the completion's status. After any failure the QPs of both sides are
  /// in the error state: they are rebuilt, and this waits until they are up again.
  verbs::WcStatus write(uint64_t addr, uint32_t rkey, uint32_t len, uint8_t fill) {
    std::memset(buffer_.data(), fill, len);
    return post(verbs::WrOpcode::kRdmaWrite, addr, rkey, len);
  }
  verbs::WcStatus read(uint64_t addr, uint32_t rkey, uint32_t len) { return post(verbs::WrOpcode::kRdmaRead, addr, rkey, len); }
  /// One RDMA WRITE with immediate `imm` (consuming one of the receives the victim keeps posted on
  /// the lane, as its daemon's sends of one chunk do: docs/flows.md, "Sends by WRITE with immediate").
  verbs::WcStatus write_with_imm(uint64_t addr, uint32_t rkey, uint32_t len, uint8_t fill, uint32_t imm) {
    std::memset(buffer_.data(), fill, len);
    return post(verbs::WrOpcode::kRdmaWriteWithImm, addr, rkey, len, imm);
  }
  const uint8_t* buffer() const { return buffer_.data(); }
  /// The number the victim and we know our current session by (0: none ready).
  uint32_t session() {
    uint32_t n = 0;
    on_io([&] { n = session_ ? session_->session_of(victim_) : 0; });
    return n;
  }
  int rebuilds() const { return rebuilds_.load(); }

 private:
  void start_channel() {
    const base::Status st = channel_->start();
    started_ = st.ok();
    start_error_ = st.message();
    work_.emplace(io_.get_executor());
    thread_ = std::thread([this] { io_.run(); });
  }

 public:
  template <class F>
  static bool poll_until(F&& f, std::chrono::milliseconds deadline) {
    const auto end = std::chrono::steady_clock::now() + deadline;
    while (!f()) {
      if (std::chrono::steady_clock::now() >= end) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return true;
  }

 private:
  void set_qp(verbs::QueuePair* qp) {
    std::lock_guard lock(mu_);
    qp_ = qp;
    if (qp_ != nullptr)
      for (uint32_t i = 0; i < kInboxSlots; ++i) post_inbox(i);
  }
  // Under mu_.
  void post_inbox(uint64_t slot) {
    verbs::RecvWr r;
    r.wr_id = slot;
    r.sge = {reinterpret_cast<uint64_t>(inbox_.data() + slot * peer::kMailBytes), peer::kMailBytes, inbox_mr_->lkey()};
    (void)qp_->post_recv({&r, 1});
  }
  verbs::QueuePair* current_qp() {
    std::lock_guard lock(mu_);
    return qp_;
  }

  verbs::WcStatus post(verbs::WrOpcode op, uint64_t addr, uint32_t rkey, uint32_t len, uint32_t imm = 0) {
    verbs::QueuePair* qp = current_qp();
    if (qp == nullptr) return verbs::WcStatus::kGeneralError;
    verbs::SendWr w;
    w.wr_id = ++wr_id_;
    w.opcode = op;
    w.sge = {reinterpret_cast<uint64_t>(buffer_.data()), len, mr_->lkey()};
    w.remote_addr = addr;
    w.rkey = rkey;
    w.imm_data = imm;
    if (!qp->post_send({&w, 1}).ok()) return verbs::WcStatus::kGeneralError;
    verbs::WcStatus status = verbs::WcStatus::kGeneralError;
    bool got = poll_until(
        [&] {
          verbs::WorkCompletion wc[4];
          const size_t n = scq_->poll(wc);
          for (size_t i = 0; i < n; ++i)
            if (wc[i].wr_id == w.wr_id) {
              status = wc[i].status;
              return true;
            }
          return false;
        },
        std::chrono::seconds(10));
    if (got && status == verbs::WcStatus::kSuccess) return status;
    // Both ends of the lane are in the error state now: ask the victim for fresh QPs.
    const int before = rebuilds_.load();
    on_io([&] {
      set_qp(nullptr);
      if (session_->rebuild(victim_, 0, peer::RebuildCause::kRequestRefused)) ++rebuilds_;
    });
    if (rebuilds_.load() == before || !wait_ready(std::chrono::seconds(10))) return verbs::WcStatus::kGeneralError;
    return got ? status : verbs::WcStatus::kRetryExceeded;
  }

  std::string id_;
  std::string victim_;
  verbs::BackendRegistry registry_;
  std::unique_ptr<verbs::Device> dev_;
  std::unique_ptr<verbs::ProtectionDomain> pd_;
  std::unique_ptr<verbs::CompletionQueue> scq_;
  std::unique_ptr<verbs::CompletionQueue> rcq_;
  static constexpr uint32_t kInboxSlots = 16;
  std::vector<uint8_t> buffer_;
  std::vector<uint8_t> inbox_;  // kInboxSlots lane mail buffers
  std::unique_ptr<verbs::MemoryRegion> inbox_mr_;
  std::vector<peer::RecvPost> recv_posts_;
  std::unique_ptr<verbs::MemoryRegion> mr_;
  boost::asio::io_context io_;
  std::unique_ptr<peer::PeerChannel> channel_;
  std::unique_ptr<peer::PeerSession> session_;
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work_;
  std::thread thread_;
  bool started_ = false;
  std::string start_error_;
  std::mutex mu_;
  verbs::QueuePair* qp_ = nullptr;
  std::vector<peer::Grant> grants_;
  std::vector<peer::GrantAck> acks_;
  std::atomic<bool> connected_{false};
  std::atomic<int> rebuilds_{0};
  uint64_t wr_id_ = 0;
};

}  // namespace rdmad::security
