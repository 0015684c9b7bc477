// Decodes and validates one request frame from a client. Pure function of the bytes, the number
// of fds that came with them and the connection's negotiated version: the fuzz target's entry.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <variant>

#include "rdmad/protocol.h"

namespace rdmad::clients {

enum class DecodeAction {
  kDispatch,    // well-formed: serve it
  kReplyError,  // framing intact but the request is wrong: answer with an error, keep the connection
  kClose,       // the frame cannot be parsed: drop this connection
};

using RequestBody =
    std::variant<std::monostate, proto::HelloRequest, proto::NearestNicsRequest, proto::RegisterHostRequest,
                 proto::RegisterDmabufRequest, proto::DeregisterRequest, proto::ListRequest,
                 proto::FlowOpenRequest, proto::FlowCloseRequest, proto::ExportRequest, proto::ImportRequest,
                 proto::RevokeRequest, proto::CcShowRequest, proto::NicDetailsRequest, proto::CcSetRequest,
                 proto::ResumeRequest, proto::QueryRegistrationRequest, proto::TestStallRequest>;

struct DecodedRequest {
  DecodeAction action = DecodeAction::kClose;
  proto::Header header{};  // valid unless action == kClose
  RequestBody body;
  rdmad_status status = RDMAD_OK;  // the error to reply with
  const char* reason = "";         // static text naming the failed check
};

// negotiated_version: 0 before the hello exchange. fd_count: fds received with the frame;
// control_truncated: the kernel dropped fds (MSG_CTRUNC).
DecodedRequest decode_request(std::span<const std::byte> frame, size_t fd_count, bool control_truncated,
                              uint16_t negotiated_version);

// Access flags valid for a registration (no unknown bits; remote write/atomic need local write).
bool valid_access(uint32_t access);

}  // namespace rdmad::clients
