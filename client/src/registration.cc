// Registration calls of the C API, with the client-side cache of repeated registrations.
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

#include "client_impl.h"
#include "cuda_loader.h"

using rdmad::client::fail;
using rdmad::proto::MsgType;

namespace {

enum CacheKind { kHostKey = 1, kGpuKey = 2, kDmabufKey = 3 };

rdmad_status finish_registration(rdmad_client* client, const rdmad::client::Reply& r, const MrCacheKey& key,
                                 rdmad_mr** out) {
  if (r.status != RDMAD_OK) return fail(client, r.status, r.error);
  rdmad::proto::RegisterReply reply;
  if (r.body.size() != sizeof(reply))
    return fail(client, RDMAD_ERR_PROTOCOL, "register reply has the wrong size");
  std::memcpy(&reply, r.body.data(), sizeof(reply));
  if (reply.nic_count > rdmad::proto::kMaxNics)
    return fail(client, RDMAD_ERR_PROTOCOL, "register reply nic_count");
  auto* mr = new rdmad_mr;
  mr->handle = reply.handle;
  mr->iova = reply.iova;
  mr->length = reply.length;
  for (uint32_t i = 0; i < reply.nic_count; ++i)
    mr->keys.push_back({reply.keys[i].nic_index, reply.keys[i].lkey, reply.keys[i].rkey});
  mr->cache_key = key;
  client->cache.emplace(key, mr);
  *out = mr;
  return RDMAD_OK;
}

// A repeat of a live registration: one more reference, no round trip.
bool cached(rdmad_client* client, const MrCacheKey& key, rdmad_mr** out) {
  auto it = client->cache.find(key);
  if (it == client->cache.end()) return false;
  ++it->second->refs;
  *out = it->second;
  return true;
}

}  // namespace

extern "C" {

rdmad_status rdmad_register_host(rdmad_client* client, int fd, uint64_t offset, uint64_t length,
                                 uint32_t access, uint32_t nic_mask, rdmad_mr** out) {
  if (client == nullptr || out == nullptr || fd < 0) return RDMAD_ERR_INVALID_ARGUMENT;
  *out = nullptr;
  struct stat st {};
  if (fstat(fd, &st) != 0)
    return fail(client, RDMAD_ERR_INVALID_ARGUMENT, std::string("fstat: ") + strerror(errno));
  MrCacheKey key{kHostKey, st.st_dev, st.st_ino, offset, length, access, nic_mask};
  std::lock_guard lock(client->mu);
  if (cached(client, key, out)) return RDMAD_OK;
  rdmad::proto::RegisterHostRequest req{offset, length, access, nic_mask};
  auto r = rdmad::client::call(client, MsgType::kRegisterHost, rdmad::client::as_bytes_of(req), fd);
  return finish_registration(client, r, key, out);
}

rdmad_status rdmad_register_gpu(rdmad_client* client, uint64_t device_ptr, uint64_t length, uint32_t access,
                                uint32_t nic_mask, rdmad_mr** out) {
  if (client == nullptr || out == nullptr) return RDMAD_ERR_INVALID_ARGUMENT;
  *out = nullptr;
  if (length == 0) return fail(client, RDMAD_ERR_INVALID_ARGUMENT, "zero length");
  MrCacheKey key{kGpuKey, device_ptr, 0, 0, length, access, nic_mask};
  std::lock_guard lock(client->mu);
  if (cached(client, key, out)) return RDMAD_OK;
  rdmad::client::DmabufExport exp;
  std::string error;
  rdmad_status s = rdmad::client::export_dmabuf(device_ptr, length, &exp, &error);
  if (s != RDMAD_OK) return fail(client, s, error);
  rdmad::proto::RegisterDmabufRequest req{exp.offset, length, device_ptr, access, nic_mask, {}};
  if (rdmad_location where{}; rdmad_locate_gpu(device_ptr, &where) == RDMAD_OK)
    rdmad::proto::copy_cstr(req.gpu_pci_address, where.pci_address);
  auto r = rdmad::client::call(client, MsgType::kRegisterDmabuf, rdmad::client::as_bytes_of(req), exp.fd);
  close(exp.fd);  // the daemon holds its own reference until it registered
  return finish_registration(client, r, key, out);
}

rdmad_status rdmad_register_dmabuf(rdmad_client* client, int fd, uint64_t offset, uint64_t length,
                                   uint64_t device_ptr, uint32_t access, uint32_t nic_mask, rdmad_mr** out) {
  if (client == nullptr || out == nullptr || fd < 0) return RDMAD_ERR_INVALID_ARGUMENT;
  *out = nullptr;
  if (length == 0) return fail(client, RDMAD_ERR_INVALID_ARGUMENT, "zero length");
  struct stat st {};
  if (fstat(fd, &st) != 0)
    return fail(client, RDMAD_ERR_INVALID_ARGUMENT, std::string("fstat: ") + strerror(errno));
  MrCacheKey key{kDmabufKey, st.st_dev, st.st_ino, offset, length, access, nic_mask};
  std::lock_guard lock(client->mu);
  if (cached(client, key, out)) return RDMAD_OK;
  rdmad::proto::RegisterDmabufRequest req{offset, length, device_ptr, access, nic_mask, {}};
  if (rdmad_location where{}; device_ptr != 0 && rdmad_locate_gpu(device_ptr, &where) == RDMAD_OK)
    rdmad::proto::copy_cstr(req.gpu_pci_address, where.pci_address);
  auto r = rdmad::client::call(client, MsgType::kRegisterDmabuf, rdmad::client::as_bytes_of(req), fd);
  return finish_registration(client, r, key, out);
}

rdmad_status rdmad_deregister(rdmad_client* client, rdmad_mr* mr) {
  if (client == nullptr || mr == nullptr) return RDMAD_ERR_INVALID_ARGUMENT;
  std::lock_guard lock(client->mu);
  if (mr->lost) {  // the daemon forgot it when it restarted; only our copy remains
    delete mr;
    return RDMAD_OK;
  }
  if (--mr->refs > 0) return RDMAD_OK;
  rdmad::proto::DeregisterRequest req{mr->handle};
  uint64_t handle = mr->handle;
  // Still cached during the call: a reconnect on the way marks it lost like every other one.
  auto r = rdmad::client::call(client, MsgType::kDeregister, rdmad::client::as_bytes_of(req), -1);
  bool lost_before = mr->lost;
  if (!lost_before) client->cache.erase(mr->cache_key);
  delete mr;
  if (lost_before) return RDMAD_OK;  // reconnected on the way: the daemon no longer has it
  if (r.status != RDMAD_OK)
    return fail(client, r.status, r.error + " (handle " + std::to_string(handle) + ")");
  return RDMAD_OK;
}

uint64_t rdmad_mr_handle(const rdmad_mr* mr) { return mr->handle; }
uint64_t rdmad_mr_iova(const rdmad_mr* mr) { return mr->iova; }
uint64_t rdmad_mr_length(const rdmad_mr* mr) { return mr->length; }
size_t rdmad_mr_nic_count(const rdmad_mr* mr) { return mr->keys.size(); }
int rdmad_mr_is_lost(const rdmad_mr* mr) { return mr->lost ? 1 : 0; }

rdmad_status rdmad_mr_key(const rdmad_mr* mr, size_t i, rdmad_nic_key* out) {
  if (mr == nullptr || out == nullptr || i >= mr->keys.size()) return RDMAD_ERR_INVALID_ARGUMENT;
  *out = mr->keys[i];
  return RDMAD_OK;
}

}  // extern "C"
