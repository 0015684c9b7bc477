#pragma once
// Latency trace points: timestamps of named points on a request's way through the threads and
// processes (client, flow engine, control thread, soft-NIC datapath, on both nodes), for finding
// where a small transfer's time goes. Compiled in only with `cmake -DRDMAD_TRACE_POINTS=ON` (a
// developer's build: never packaged); otherwise `mark` is empty and inlined away.
//
// A traced process keeps its points in memory (the first 1,048,576; one relaxed atomic increment
// and a clock read each) and writes them at exit to `$RDMAD_TRACE_DIR/trace.<pid>`, one line per
// point: `<CLOCK_MONOTONIC ns> <pid> <tid> <point> <arg>`. Every process of one host shares the
// clock, so the files of two daemons and a client merge into one timeline
// (bench/flow/trace_report.py). Nothing is written when RDMAD_TRACE_DIR is unset.
#include <cstdint>
#include <string>
#include <string_view>

namespace rdmad::base::trace {

#ifdef RDMAD_TRACE_POINTS
inline constexpr bool kEnabled = true;
#else
inline constexpr bool kEnabled = false;
#endif

enum class Point : uint8_t {
  // Flow engine (daemon/flow).
  kRequestTaken,       // a client's request taken from its ring (arg: its ring::Op)
  kRecvSubmitted,      // a client's RECV advertised to the peer
  kCreditTaken,        // a peer's receive advertisement reached the engine
  kSendStarted,        // a SEND has a receive to go into (credit taken, or already held)
  kChunkPosted,        // a chunk's work requests posted on a lane QP
  kChunkDone,          // a chunk's completion
  kDonePosted,         // a send-done posted as a SEND on a lane
  kDoneArrived,        // a send-done reached the engine (lane or control channel)
  kCompletionWritten,  // a completion written to a client's ring (arg: its wr_id)
  kEngineSleeps,
  kEngineWakes,
  // Control thread (daemon/flow, the peer channel).
  kRecvPostSent,     // a receive advertisement handed to the peer channel
  kRecvPostArrived,  // a peer's receive advertisement decoded
  // Soft NIC datapath (verbs/soft).
  kPacketsSent,      // arg: packets in the batch
  kPacketsReceived,  // arg: datagrams
  // Benchmarks (bench/flow).
  kBenchStart,  // arg: the iteration
  kBenchRecvPosted,
  kBenchSendPosted,
  kBenchSendSeen,
  kBenchRecvSeen,
  kCount,
};

std::string_view name(Point p);

/// Records `p` now (the real work behind `mark`, there whatever the build; for tests).
void record(Point p, uint64_t arg = 0) noexcept;

/// Records `p` in a -DRDMAD_TRACE_POINTS build; nothing otherwise.
inline void mark([[maybe_unused]] Point p, [[maybe_unused]] uint64_t arg = 0) noexcept {
  if constexpr (kEnabled) record(p, arg);
}

/// Writes the points recorded so far to `path` (the format above); false when it cannot.
bool write_file(const std::string& path);

/// How many points were recorded (at most the buffer's 1,048,576).
uint64_t recorded();

}  // namespace rdmad::base::trace
