#include "rdmad/roce/headers.h"

#include "bytes.h"

namespace rdmad::roce {

using detail::load_be16;
using detail::load_be24;
using detail::load_be32;
using detail::load_be64;
using detail::store_be16;
using detail::store_be24;
using detail::store_be32;
using detail::store_be64;

void write_bth(const Bth& bth, uint8_t* out) {
  out[0] = static_cast<uint8_t>(bth.opcode);
  out[1] = static_cast<uint8_t>((bth.solicited ? 0x80 : 0) | (bth.mig_req ? 0x40 : 0) |
                                ((bth.pad_count & 0x3) << 4) | (bth.tver & 0xF));
  store_be16(out + 2, bth.pkey);
  out[4] = static_cast<uint8_t>((bth.fecn ? 0x80 : 0) | (bth.becn ? 0x40 : 0));
  store_be24(out + 5, bth.dest_qp & kQpnMask);
  out[8] = bth.ack_req ? 0x80 : 0;
  store_be24(out + 9, bth.psn & kPsnMask);
}

Bth read_bth(const uint8_t* in) {
  Bth b;
  b.opcode = static_cast<Opcode>(in[0]);
  b.solicited = (in[1] & 0x80) != 0;
  b.mig_req = (in[1] & 0x40) != 0;
  b.pad_count = static_cast<uint8_t>((in[1] >> 4) & 0x3);
  b.tver = in[1] & 0xF;
  b.pkey = load_be16(in + 2);
  b.fecn = (in[4] & 0x80) != 0;
  b.becn = (in[4] & 0x40) != 0;
  b.dest_qp = load_be24(in + 5);
  b.ack_req = (in[8] & 0x80) != 0;
  b.psn = load_be24(in + 9);
  return b;
}

void write_reth(const Reth& reth, uint8_t* out) {
  store_be64(out, reth.va);
  store_be32(out + 8, reth.rkey);
  store_be32(out + 12, reth.dma_length);
}

Reth read_reth(const uint8_t* in) { return {load_be64(in), load_be32(in + 8), load_be32(in + 12)}; }

void write_aeth(const Aeth& aeth, uint8_t* out) {
  out[0] = aeth.syndrome;
  store_be24(out + 1, aeth.msn & 0xFFFFFF);
}

Aeth read_aeth(const uint8_t* in) { return {in[0], load_be24(in + 1)}; }

}  // namespace rdmad::roce
