// rdmad: the per-node RDMA daemon. See README.md and docs/ for what it does.
#include <cstdio>
#include <iostream>
#include <string>

#include <CLI/CLI.hpp>

#include "rdmad/config/loader.h"
#include "rdmad/daemon/daemon.h"
#include "rdmad/base/log.h"
#include "rdmad/version.h"

namespace {

std::string fmt_warnings(size_t n) { return " (" + std::to_string(n) + " warning" + (n == 1 ? ")" : "s)"); }

int check_config(const std::string& path) {
  rdmad::config::LoadResult r = rdmad::config::load_file(path);
  if (r.ok()) rdmad::config::apply_environment(r);  // as the daemon will read it
  for (const auto& w : r.warnings) std::fprintf(stderr, "warning: %s\n", w.to_string().c_str());
  for (const auto& e : r.errors) std::fprintf(stderr, "%s\n", e.to_string().c_str());
  if (!r.ok()) {
    std::fprintf(stderr, "%s: %zu error(s)\n", path.c_str(), r.errors.size());
    return 1;
  }
  std::printf("%s: ok%s\n", path.c_str(), r.warnings.empty() ? "" : fmt_warnings(r.warnings.size()).c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"rdmad: per-node RDMA daemon for GPU servers (RoCEv2 and InfiniBand).\n"
               "Runs in the foreground; under systemd use Type=notify. SIGHUP reloads the config,\n"
               "SIGTERM/SIGINT stop gracefully.",
               "rdmad"};
  std::string config_path;
  std::string check_path;
  bool print_default = false;
  bool print_doc = false;
  bool version = false;
  bool test_hooks = false;
  // No CLI11 existence check: the loader refuses a missing or unsafe file (a directory, FIFO,
  // device, or one too large) with the same message --check-config prints, and exit code 1.
  app.add_option("-c,--config", config_path,
                 "Configuration file (TOML, a regular file of at most 4 MiB); without it the embedded default is used");
  app.add_option("--check-config", check_path,
                 "Check a configuration file as the daemon would read it, print every error, exit 0 or 1");
  app.add_flag("--print-default-config", print_default, "Print the default configuration, every key documented");
  app.add_flag("--print-config-doc", print_doc, "Print the configuration reference (docs/configuration.md)");
  app.add_flag("-V,--version", version, "Print the version and exit");
  app.add_flag("--enable-test-hooks", test_hooks,
               "Allow test hooks (rdmactl debug stall: a thread spins busy, the watchdog's test); "
               "logged as a warning at start; never in production");
  CLI11_PARSE(app, argc, argv);

  if (version) {
    std::printf("rdmad %s (commit %s)\n", rdmad::kVersion, rdmad::kCommit);
    return 0;
  }
  if (print_default) {
    std::fputs(rdmad::config::render_default_config().c_str(), stdout);
    return 0;
  }
  if (print_doc) {
    std::fputs(rdmad::config::render_markdown().c_str(), stdout);
    return 0;
  }
  if (!check_path.empty()) return check_config(check_path);

  rdmad::config::LoadResult loaded;
  if (config_path.empty()) {
    loaded.config = rdmad::config::default_config();
  } else {
    loaded = rdmad::config::load_file(config_path);
  }
  rdmad::config::apply_environment(loaded);
  if (!loaded.ok()) {
    // Before the loggers exist: under journald each line carries its priority (<3> = error) like
    // every logged line, so `journalctl -p err -u rdmad` shows why the service is down.
    const char* err = rdmad::log::stderr_is_journal() ? "<3>" : "";
    for (const auto& e : loaded.errors) std::fprintf(stderr, "%s%s\n", err, e.to_string().c_str());
    std::fprintf(stderr, "%srdmad: not starting: %zu configuration error(s)\n", err, loaded.errors.size());
    return 1;
  }
  rdmad::log::setup(*rdmad::log::parse_level(loaded.config.daemon.log_level));
  rdmad::config::log_warnings(loaded);
  rdmad::daemon::Daemon daemon(std::move(loaded.config), config_path);
  if (test_hooks) daemon.enable_test_hooks();
  return daemon.run();
}
