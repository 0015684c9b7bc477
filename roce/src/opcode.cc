#include "rdmad/roce/opcode.h"

#include <array>

namespace rdmad::roce {
namespace {

struct Entry {
  uint8_t code;
  const char* name;
  OpcodeInfo info;
};

constexpr PayloadKind kNone = PayloadKind::kNone;
constexpr PayloadKind kFull = PayloadKind::kFull;
constexpr PayloadKind kTail = PayloadKind::kTail;

// IB spec table 38 (RC) and A17.9.3 (CNP). Fields: valid, reth, aeth, immdt, payload, first, last.
// READ responses First/Last/Only carry an AETH, Middle does not (IB spec 9.7.5.1.6).
constexpr Entry kEntries[] = {
    {0x00, "RC Send First", {true, false, false, false, kFull, true, false}},
    {0x01, "RC Send Middle", {true, false, false, false, kFull, false, false}},
    {0x02, "RC Send Last", {true, false, false, false, kTail, false, true}},
    {0x03, "RC Send Last Immediate", {true, false, false, true, kTail, false, true}},
    {0x04, "RC Send Only", {true, false, false, false, kTail, true, true}},
    {0x05, "RC Send Only Immediate", {true, false, false, true, kTail, true, true}},
    {0x06, "RC RDMA Write First", {true, true, false, false, kFull, true, false}},
    {0x07, "RC RDMA Write Middle", {true, false, false, false, kFull, false, false}},
    {0x08, "RC RDMA Write Last", {true, false, false, false, kTail, false, true}},
    {0x09, "RC RDMA Write Last Immediate", {true, false, false, true, kTail, false, true}},
    {0x0A, "RC RDMA Write Only", {true, true, false, false, kTail, true, true}},
    {0x0B, "RC RDMA Write Only Immediate", {true, true, false, true, kTail, true, true}},
    {0x0C, "RC RDMA Read Request", {true, true, false, false, kNone, true, true}},
    {0x0D, "RC RDMA Read Response First", {true, false, true, false, kFull, true, false}},
    {0x0E, "RC RDMA Read Response Middle", {true, false, false, false, kFull, false, false}},
    {0x0F, "RC RDMA Read Response Last", {true, false, true, false, kTail, false, true}},
    {0x10, "RC RDMA Read Response Only", {true, false, true, false, kTail, true, true}},
    {0x11, "RC Acknowledge", {true, false, true, false, kNone, true, true}},
    {0x81, "CNP", {true, false, false, false, PayloadKind::kCnpZeros, true, true}},
};

struct Table {
  std::array<OpcodeInfo, 256> info{};
  std::array<const char*, 256> name{};
};

constexpr Table make_table() {
  Table t{};
  for (auto& n : t.name) n = "unknown";
  for (const Entry& e : kEntries) {
    t.info[e.code] = e.info;
    t.name[e.code] = e.name;
  }
  return t;
}

constexpr Table kTable = make_table();

}  // namespace

const OpcodeInfo& opcode_info(uint8_t opcode) { return kTable.info[opcode]; }

const char* opcode_name(uint8_t opcode) { return kTable.name[opcode]; }

}  // namespace rdmad::roce
