#pragma once
// Builds a one-port fabric in front of a receiving peer.
#include <chrono>
#include <memory>
#include <thread>

#include "rdmad/tools/fabric/fabric.h"
#include "udp_peer.h"

namespace rdmad::fabric::test {

inline PortConfig port_to(const UdpPeer& receiver, const char* listen = "127.0.0.1:0") {
  PortConfig p;
  p.name = "test";
  p.listen = Endpoint::parse(listen);
  p.forward = receiver.endpoint();
  return p;
}

inline std::unique_ptr<Fabric> start_fabric(PortConfig port) {
  FabricConfig c;
  c.ports.push_back(std::move(port));
  auto f = std::make_unique<Fabric>(std::move(c));
  f->start();
  return f;
}

// Polls the port's stats (published every millisecond) until `done` holds or the deadline passes.
// Polls at 5 kHz rather than spinning: a spinning test thread takes the CPU the port needs.
template <typename Pred>
PortStats wait_for_stats(const Fabric& f, Pred done,
                         std::chrono::milliseconds deadline = std::chrono::seconds(10)) {
  const auto end = std::chrono::steady_clock::now() + deadline;
  PortStats s = f.stats(0);
  while (!done(s) && std::chrono::steady_clock::now() < end) {
    std::this_thread::sleep_for(std::chrono::microseconds(200));
    s = f.stats(0);
  }
  return s;
}

}  // namespace rdmad::fabric::test
