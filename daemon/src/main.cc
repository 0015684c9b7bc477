// rdmad: the per-node RDMA daemon. See README.md and docs/ for what it does.
#include <cstdio>
#include <iostream>
#include <string>

#include <CLI/CLI.hpp>

#include "rdmad/config/loader.h"
#include "rdmad/daemon/daemon.h"
#include "rdmad/daemon/preflight.h"
#include "rdmad/base/log.h"
#include "rdmad/version.h"

namespace {

std::string fmt_count(size_t n, const char* one, const char* many) { return std::to_string(n) + " " + (n == 1 ? one : many); }

int check_config(const std::string& path, const std::string& user) {
  // Discovery logs what it finds at info; here only its warnings belong beside the findings.
  rdmad::log::setup(spdlog::level::warn);
  rdmad::verbs::BackendRegistry backends;
  rdmad::verbs::register_builtin_backends(backends);
  const rdmad::daemon::PreflightReport r = rdmad::daemon::preflight(path, {user}, backends);
  if (!r.identity.empty()) std::printf("note: files checked as %s\n", r.identity.c_str());
  for (const auto& n : r.notes) std::printf("note: %s\n", n.c_str());
  std::fflush(stdout);  // in order with the findings on stderr
  for (const auto& w : r.warnings) std::fprintf(stderr, "warning: %s\n", w.c_str());
  for (const auto& e : r.errors) std::fprintf(stderr, "%s\n", e.c_str());
  for (const auto& n : r.not_checked) std::fprintf(stderr, "not checked: %s\n", n.c_str());
  const std::string unchecked =
      r.not_checked.empty() ? "" : fmt_count(r.not_checked.size(), "check", "checks") + " not run";
  if (!r.ok()) {
    std::fprintf(stderr, "%s: %zu error(s)%s\n", path.c_str(), r.errors.size(),
                 unchecked.empty() ? "" : ("; " + unchecked).c_str());
    return 1;
  }
  std::string extra;
  if (!r.warnings.empty()) extra = fmt_count(r.warnings.size(), "warning", "warnings");
  if (!unchecked.empty()) extra += (extra.empty() ? "" : ", ") + unchecked;
  std::printf("%s: ok%s\n", path.c_str(), extra.empty() ? "" : (" (" + extra + ")").c_str());
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
  std::string check_user;
  bool print_default = false;
  bool print_doc = false;
  bool version = false;
  bool test_hooks = false;
  // No CLI11 existence check: the loader refuses a missing or unsafe file (a directory, FIFO,
  // device, or one too large) with the same message --check-config prints, and exit code 1.
  app.add_option("-c,--config", config_path,
                 "Configuration file (TOML, a regular file of at most 4 MiB); without it the embedded default is used");
  auto* check = app.add_option("--check-config", check_path,
                 "Run every start-up check that needs no start on a configuration file: the file and the "
                 "credentials it names as the service's user reads them (as root), the NICs' devices and addresses, "
                 "the peer channel; print every error and each check it could not run; exit 0 or 1");
  app.add_option("--user", check_user,
                 "With --check-config: the user the service runs as (User= of the unit; default rdmad when it "
                 "exists)")
      ->needs(check);
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
  if (!check_path.empty()) return check_config(check_path, check_user);

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
