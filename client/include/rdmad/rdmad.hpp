// Thin C++ RAII wrapper over the librdmad C API. Failures throw rdmad::Error carrying the status
// and the daemon's message.
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "rdmad/rdmad.h"

namespace rdmad {

class Error : public std::runtime_error {
 public:
  Error(rdmad_status status, const std::string& what)
      : std::runtime_error(std::string(rdmad_strerror(status)) + ": " + what), status_(status) {}
  rdmad_status status() const { return status_; }

 private:
  rdmad_status status_;
};

// A registration; deregisters (drops its reference) when destroyed. Must not outlive its Client.
class Registration {
 public:
  Registration() = default;
  Registration(rdmad_client* client, rdmad_mr* mr) : client_(client), mr_(mr) {}
  Registration(Registration&& o) noexcept : client_(o.client_), mr_(std::exchange(o.mr_, nullptr)) {}
  Registration& operator=(Registration&& o) noexcept {
    if (this != &o) {
      reset();
      client_ = o.client_;
      mr_ = std::exchange(o.mr_, nullptr);
    }
    return *this;
  }
  ~Registration() { reset(); }

  // Deregisters now; errors are ignored (the daemon drops the handle with the connection anyway).
  void reset() {
    if (mr_ != nullptr) rdmad_deregister(client_, mr_);
    mr_ = nullptr;
  }
  uint64_t handle() const { return rdmad_mr_handle(mr_); }
  uint64_t iova() const { return rdmad_mr_iova(mr_); }
  uint64_t length() const { return rdmad_mr_length(mr_); }
  bool lost() const { return rdmad_mr_is_lost(mr_) != 0; }
  std::vector<rdmad_nic_key> keys() const {
    std::vector<rdmad_nic_key> out(rdmad_mr_nic_count(mr_));
    for (size_t i = 0; i < out.size(); ++i) rdmad_mr_key(mr_, i, &out[i]);
    return out;
  }
  rdmad_mr* get() const { return mr_; }

 private:
  rdmad_client* client_ = nullptr;
  rdmad_mr* mr_ = nullptr;
};

// Host memory from rdmad_alloc_host, freed on destruction.
class HostBuffer {
 public:
  explicit HostBuffer(size_t length) {
    if (rdmad_status s = rdmad_alloc_host(length, &buf_); s != RDMAD_OK) throw Error(s, "rdmad_alloc_host");
  }
  HostBuffer(HostBuffer&& o) noexcept : buf_(std::exchange(o.buf_, rdmad_host_buffer{nullptr, 0, -1})) {}
  HostBuffer& operator=(HostBuffer&&) = delete;
  ~HostBuffer() { rdmad_free_host(&buf_); }
  void* data() const { return buf_.addr; }
  size_t size() const { return buf_.length; }
  int fd() const { return buf_.fd; }

 private:
  rdmad_host_buffer buf_{nullptr, 0, -1};
};

class Client {
 public:
  // Connects (nullptr: $RDMAD_SOCKET or /run/rdmad/rdmad.sock).
  explicit Client(const char* socket_path = nullptr) {
    rdmad_client* c = nullptr;
    if (rdmad_status s = rdmad_connect(socket_path, &c); s != RDMAD_OK)
      throw Error(s, rdmad_last_error(nullptr));
    client_.reset(c);
  }

  std::vector<rdmad_nic_info> nics() {
    std::vector<rdmad_nic_info> out(RDMAD_MAX_NICS);
    size_t n = 0;
    check(rdmad_query_nics(get(), out.data(), out.size(), &n));
    out.resize(std::min(n, out.size()));
    return out;
  }
  Registration register_host(int fd, uint64_t offset, uint64_t length, uint32_t access,
                             uint32_t nic_mask = 0) {
    rdmad_mr* mr = nullptr;
    check(rdmad_register_host(get(), fd, offset, length, access, nic_mask, &mr));
    return Registration(get(), mr);
  }
  Registration register_host(const HostBuffer& buf, uint32_t access, uint32_t nic_mask = 0) {
    return register_host(buf.fd(), 0, buf.size(), access, nic_mask);
  }
  Registration register_gpu(uint64_t device_ptr, uint64_t length, uint32_t access, uint32_t nic_mask = 0) {
    rdmad_mr* mr = nullptr;
    check(rdmad_register_gpu(get(), device_ptr, length, access, nic_mask, &mr));
    return Registration(get(), mr);
  }
  std::string diagnose() {
    std::string text(8192, '\0');
    check(rdmad_diagnose(get(), text.data(), text.size()));
    text.resize(text.find('\0'));
    return text;
  }
  rdmad_client* get() const { return client_.get(); }

 private:
  struct Closer {
    void operator()(rdmad_client* c) const { rdmad_disconnect(c); }
  };
  void check(rdmad_status s) {
    if (s != RDMAD_OK) throw Error(s, rdmad_last_error(get()));
  }
  std::unique_ptr<rdmad_client, Closer> client_;
};

}  // namespace rdmad
