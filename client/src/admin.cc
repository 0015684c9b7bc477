#include "rdmad/admin.h"

#include "client_impl.h"

namespace rdmad::admin {

rdmad_status call(rdmad_client* client, proto::MsgType type, std::span<const std::byte> body,
                  std::vector<std::byte>* reply) {
  if (client == nullptr || reply == nullptr) return RDMAD_ERR_INVALID_ARGUMENT;
  std::lock_guard lock(client->mu);
  auto r = client::call(client, type, body, -1);
  if (r.status != RDMAD_OK) return client::fail(client, r.status, r.error);
  reply->assign(r.body.begin(), r.body.end());
  return RDMAD_OK;
}

}  // namespace rdmad::admin
