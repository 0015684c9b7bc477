// Encode+ICRC and decode+verify throughput of the RoCEv2 codec for 64 B and 4 KiB payloads, with a
// memcpy of the same datagram as the baseline measured in the same run; CRC-32 alone with each
// implementation (slicing-by-8 is the baseline of the folding ones).
#include <benchmark/benchmark.h>

#include <cstring>
#include <vector>

#include "rdmad/roce/crc32.h"
#include "rdmad/roce/crc32_impl.h"
#include "rdmad/roce/packet.h"

namespace {

using namespace rdmad::roce;

IpUdpInfo bench_ip() {
  IpUdpInfo ip;
  ip.src = IpAddr::v4(0x7F000001);
  ip.dst = IpAddr::v4(0x7F000002);
  return ip;
}

Packet write_packet(std::span<const uint8_t> payload) {
  Packet p;
  p.bth.opcode = Opcode::kWriteOnly;
  p.bth.dest_qp = 0x11;
  p.bth.psn = 1234;
  p.reth = {0x1000, 0x42, static_cast<uint32_t>(payload.size())};
  p.payload = payload;
  return p;
}

void BM_EncodeIcrc(benchmark::State& state) {
  std::vector<uint8_t> payload(static_cast<size_t>(state.range(0)), 0xAB);
  std::vector<uint8_t> out(8192);
  const IpUdpInfo ip = bench_ip();
  Packet p = write_packet(payload);
  size_t n = 0;
  for (auto _ : state) {
    p.bth.psn = psn_add(p.bth.psn, 1);
    n = encode_datagram(ip, p, out);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * n));
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
}

void BM_DecodeVerify(benchmark::State& state) {
  std::vector<uint8_t> payload(static_cast<size_t>(state.range(0)), 0xAB);
  std::vector<uint8_t> buf(8192);
  const IpUdpInfo ip = bench_ip();
  const size_t n = encode_datagram(ip, write_packet(payload), buf);
  DecodeCounters counters;
  Packet pkt;
  for (auto _ : state) {
    benchmark::DoNotOptimize(decode_datagram({buf.data(), n}, &ip, &pkt, &counters));
    benchmark::DoNotOptimize(pkt);
  }
  if (counters.decoded != static_cast<uint64_t>(state.iterations())) state.SkipWithError("decode failed");
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * n));
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
}

// Baseline: copying the same number of bytes.
void BM_MemcpyBaseline(benchmark::State& state) {
  const size_t n = datagram_bytes(write_packet(std::vector<uint8_t>(static_cast<size_t>(state.range(0)))));
  std::vector<uint8_t> src(n, 1);
  std::vector<uint8_t> dst(n);
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), n);
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * n));
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
}

using UpdateFn = uint32_t (*)(uint32_t, std::span<const uint8_t>);

void run_crc32(benchmark::State& state, UpdateFn fn, bool supported) {
  if (!supported) {
    state.SkipWithError("not supported by this CPU");
    return;
  }
  std::vector<uint8_t> data(static_cast<size_t>(state.range(0)));
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 131 + 7);
  for (auto _ : state) benchmark::DoNotOptimize(fn(0, data));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * data.size()));
}

// crc32_update(): the implementation selected for this CPU.
void BM_Crc32(benchmark::State& state) { run_crc32(state, crc32_update, true); }
void BM_Crc32SlicingBy8(benchmark::State& state) { run_crc32(state, crc32_impl::update_portable, true); }
void BM_Crc32Pclmul(benchmark::State& state) {
  run_crc32(state, crc32_impl::update_pclmul, crc32_impl::pclmul_supported());
}
void BM_Crc32Vpclmul(benchmark::State& state) {
  run_crc32(state, crc32_impl::update_vpclmul, crc32_impl::vpclmul_supported());
}

void crc32_sizes(benchmark::internal::Benchmark* b) {
  for (int64_t n : {16, 48, 64, 1024, 4096, 65536}) b->Arg(n);
}

BENCHMARK(BM_EncodeIcrc)->Arg(64)->Arg(4096);
BENCHMARK(BM_DecodeVerify)->Arg(64)->Arg(4096);
BENCHMARK(BM_MemcpyBaseline)->Arg(64)->Arg(4096);
BENCHMARK(BM_Crc32SlicingBy8)->Apply(crc32_sizes);
BENCHMARK(BM_Crc32Pclmul)->Apply(crc32_sizes);
BENCHMARK(BM_Crc32Vpclmul)->Apply(crc32_sizes);
BENCHMARK(BM_Crc32)->Apply(crc32_sizes);

}  // namespace

int main(int argc, char** argv) {
  benchmark::AddCustomContext("crc32_update",
                              rdmad::roce::crc32_impl::name(rdmad::roce::crc32_impl::selected()));
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
