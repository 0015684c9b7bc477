#include "rdmad/daemon/clients/diagnose.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace rdmad::clients {
namespace {

bool read_first_line(const std::string& path, std::string* out) {
  std::ifstream in(path);
  if (!in) return false;
  std::getline(in, *out);
  return true;
}

struct Report {
  std::ostringstream text;
  std::vector<std::string> failed;
  void line(const char* status, const std::string& check, const std::string& detail) {
    text << status << ' ' << check << ": " << detail << '\n';
    if (std::string_view(status) == "fail") failed.push_back(check);
  }
};

void check_kernel(const std::string& root, Report& r) {
  std::string release;
  if (!read_first_line(root + "/proc/sys/kernel/osrelease", &release)) {
    r.line("warn", "kernel", "cannot read /proc/sys/kernel/osrelease");
    return;
  }
  int major = 0, minor = 0;
  if (std::sscanf(release.c_str(), "%d.%d", &major, &minor) != 2) {
    r.line("warn", "kernel", "cannot parse release " + release);
  } else if (major > 5 || (major == 5 && minor >= 12)) {
    r.line("ok", "kernel", release + " (dma-buf memory regions need 5.12 or later)");
  } else {
    r.line("fail", "kernel", release + " is older than 5.12: no dma-buf memory regions");
  }
}

void check_gpu_driver(const std::string& root, Report& r) {
  std::string version;
  if (read_first_line(root + "/proc/driver/nvidia/version", &version)) {
    // "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  535.104.05 ..." vs
    // "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05 ...".
    if (version.find("Open Kernel Module") != std::string::npos) {
      r.line("ok", "gpu-driver", "NVIDIA open kernel module (" + version + ")");
    } else {
      r.line("fail", "gpu-driver",
             "NVIDIA proprietary kernel module: it cannot export dma-buf, install the open module (" +
                 version + ")");
    }
  } else if (std::filesystem::exists(root + "/sys/module/nvidia")) {
    r.line("warn", "gpu-driver", "nvidia module loaded but /proc/driver/nvidia/version is unreadable");
  } else {
    r.line("fail", "gpu-driver", "no NVIDIA kernel driver loaded (/proc/driver/nvidia/version missing)");
  }
}

void check_peermem(const std::string& root, Report& r) {
  std::string version;
  if (read_first_line(root + "/sys/module/nvidia_peermem/version", &version) ||
      read_first_line(root + "/sys/kernel/mm/memory_peers/nv_mem/version", &version)) {
    r.line("info", "nvidia-peermem", "loaded, version " + version + " (legacy ibv_reg_mr on device memory)");
  } else {
    r.line("info", "nvidia-peermem", "not loaded (only the legacy path needs it; dma-buf does not)");
  }
}

}  // namespace

std::string diagnose_gpudirect(const std::string& root, const std::vector<NicDescriptor>& nics,
                               MemoryRegistrar& registrar) {
  Report r;
  check_kernel(root, r);
  check_gpu_driver(root, r);
  check_peermem(root, r);
  size_t dmabuf_nics = 0;
  if (nics.empty()) r.line("fail", "nics", "no NIC found");
  for (uint32_t i = 0; i < nics.size(); ++i) {
    DmabufSupport s = registrar.probe_dmabuf(i);
    if (s.supported) ++dmabuf_nics;
    r.line(s.supported ? "ok" : "fail", "dmabuf " + nics[i].name,
           (s.supported ? "supported (" : "not supported by backend " + nics[i].backend + ": ") + s.reason +
               (s.supported ? ")" : ""));
  }
  auto failed = [&](const char* check) {
    return std::find(r.failed.begin(), r.failed.end(), check) != r.failed.end();
  };
  if (dmabuf_nics > 0 && !failed("kernel") && !failed("gpu-driver")) {
    r.line("ok", "gpudirect", "available through dma-buf on " + std::to_string(dmabuf_nics) + " NIC(s)");
  } else {
    std::string why;
    for (const auto& f : r.failed) why += (why.empty() ? "" : ", ") + f;
    r.line("fail", "gpudirect", "unavailable, failed checks: " + why);
  }
  return r.text.str();
}

}  // namespace rdmad::clients
