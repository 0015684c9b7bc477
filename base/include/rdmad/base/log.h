#pragma once
// The per-component spdlog loggers, sharing one sink and one formatter. Under systemd
// (JOURNAL_STREAM naming our stderr) lines go to journald with their priority and fields (below),
// or to stderr with syslog "<N>" priority prefixes and no timestamps; otherwise an RFC 3339
// timestamp with its UTC offset and, on a terminal, a coloured level. Lines are `event key=value ...` (docs/operations.md).
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <spdlog/spdlog.h>

namespace rdmad::log {

enum class Component : uint8_t { kDaemon, kConfig, kMetrics, kVerbs, kCc, kIpc, kPeer, kFlow };

inline constexpr std::string_view kComponents[] = {"daemon", "config", "metrics", "verbs", "cc", "ipc", "peer", "flow"};

std::string_view name(Component component);

// Creates (or re-creates) every component logger. `journal` forces the journal format; by default
// it is chosen from JOURNAL_STREAM.
void setup(spdlog::level::level_enum level, std::optional<bool> journal = std::nullopt);
// Changes the level of every component logger (live on reload).
void set_level(spdlog::level::level_enum level);
// Parses "trace".."off"; nullopt for anything else.
std::optional<spdlog::level::level_enum> parse_level(std::string_view name);
// The logger of a component. Where setup() has not run (a test, a library user) the loggers are
// made on first use exactly as setup(info) makes them: there is one policy, not a fallback.
std::shared_ptr<spdlog::logger> get(Component component);
// Test hook: `component` logs to `logger` until the next call (or setup()); returns the previous one.
std::shared_ptr<spdlog::logger> replace_for_test(Component component, std::shared_ptr<spdlog::logger> logger);
// True when stderr is connected to the systemd journal. Then each line goes to journald's socket
// natively, with PRIORITY, RDMAD_COMPONENT and one RDMAD_<KEY> field per key=value of the line
// (and to stderr, with its "<N>" prefix, when the journal does not take it).
bool stderr_is_journal();
// journald's native datagram for `fields` (KEY=value lines; a value with a newline in the binary form).
std::string journal_datagram(const std::vector<std::pair<std::string, std::string>>& fields);
// Test hook: where the journal sink sends (default /run/systemd/journal/socket).
void set_journal_socket_for_test(const std::string& path);

}  // namespace rdmad::log
