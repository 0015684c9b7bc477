#pragma once
// Per-component spdlog loggers (daemon, config, metrics, verbs, cc, ipc, peer) sharing one stderr
// sink. Under systemd (JOURNAL_STREAM set) lines carry syslog "<N>" priority prefixes and no
// timestamps, so journald records the right priority.
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <spdlog/spdlog.h>

namespace rdmad::log {

inline constexpr std::string_view kComponents[] = {"daemon", "config", "metrics", "verbs", "cc", "ipc", "peer", "flow"};

// Creates (or re-creates) every component logger. `journal` forces the journal format; by default
// it is chosen from JOURNAL_STREAM.
void setup(spdlog::level::level_enum level, std::optional<bool> journal = std::nullopt);
// Changes the level of every component logger (live on reload).
void set_level(spdlog::level::level_enum level);
// Parses "trace".."off"; nullopt for anything else.
std::optional<spdlog::level::level_enum> parse_level(std::string_view name);
// The logger of a component; falls back to spdlog's default logger if setup() has not run.
std::shared_ptr<spdlog::logger> get(std::string_view component);
// True when stderr is connected to the systemd journal.
bool stderr_is_journal();

}  // namespace rdmad::log
