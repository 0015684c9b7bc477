#pragma once
// The per-component spdlog loggers, sharing one stderr sink and one formatter. Under systemd
// (JOURNAL_STREAM naming our stderr) lines carry syslog "<N>" priority prefixes and no timestamps,
// so journald records the right priority; otherwise an RFC 3339 timestamp with its UTC offset
// and, on a terminal, a coloured level. Lines are `event key=value ...` (docs/operations.md).
#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>

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
// True when stderr is connected to the systemd journal.
bool stderr_is_journal();

}  // namespace rdmad::log
