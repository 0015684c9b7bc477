#include "rdmad/tools/fabric/port_stats.h"

#include <fmt/format.h>

namespace rdmad::fabric {

std::string format_stats_line(const NamedPortStats& n) {
  const PortStats& s = n.stats;
  return fmt::format(
      "{} q={}B/{}p peak={}B rx={}p/{}B tx={}p/{}B drop_buf={} drop_loss={} drop_big={} tx_err={} mark={} "
      "ce_in={} dup={} reord={} late={} reseal={} no_reseal={}",
      n.name, s.queue_bytes, s.queue_packets, s.queue_peak_bytes, s.rx_packets, s.rx_bytes, s.tx_packets,
      s.tx_bytes, s.drops_buffer, s.drops_loss, s.drops_oversize, s.tx_errors, s.marked, s.ce_received,
      s.duplicated, s.reordered, s.late_departures, s.resealed, s.not_resealed);
}

std::string format_stats_json(const std::vector<NamedPortStats>& ports) {
  std::string out = "{\"ports\":[";
  for (size_t i = 0; i < ports.size(); ++i) {
    const PortStats& s = ports[i].stats;
    std::string name;
    for (char c : ports[i].name) {
      if (c == '"' || c == '\\') name.push_back('\\');
      if (static_cast<unsigned char>(c) >= 0x20) name.push_back(c);
    }
    out += fmt::format(
        "{}{{\"name\":\"{}\",\"rx_packets\":{},\"rx_bytes\":{},\"tx_packets\":{},\"tx_bytes\":{},"
        "\"drops_buffer\":{},\"drops_loss\":{},\"drops_oversize\":{},\"tx_errors\":{},\"marked\":{},"
        "\"ce_received\":{},\"duplicated\":{},\"reordered\":{},\"late_departures\":{},\"queue_bytes\":{},"
        "\"queue_packets\":{},"
        "\"queue_peak_bytes\":{},\"departures_below_kmin\":{},\"departures_between\":{},"
        "\"departures_above_kmax\":{},\"resealed\":{},\"not_resealed\":{}}}",
        i == 0 ? "" : ",", name, s.rx_packets, s.rx_bytes, s.tx_packets, s.tx_bytes, s.drops_buffer,
        s.drops_loss, s.drops_oversize, s.tx_errors, s.marked, s.ce_received, s.duplicated, s.reordered,
        s.late_departures, s.queue_bytes, s.queue_packets, s.queue_peak_bytes, s.departures_below_kmin,
        s.departures_between, s.departures_above_kmax, s.resealed, s.not_resealed);
  }
  return out + "]}\n";
}

}  // namespace rdmad::fabric
