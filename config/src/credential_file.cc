#include "rdmad/config/credential_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "careful_read.h"

namespace rdmad::config {
namespace {

// What is wrong with the file `st` describes, or "".
std::string judge(const struct stat& st, bool via_symlink, CredentialKind kind) {
  if (!S_ISREG(st.st_mode))
    return fmt::format("is {}{}, not a regular file", via_symlink ? "a symlink to " : "", file_type_name(st.st_mode));
  if (st.st_uid != 0 && st.st_uid != geteuid()) {
    return fmt::format("is owned by uid {}, not by root or the daemon's uid {}", st.st_uid, geteuid());
  }
  const unsigned mode = st.st_mode & 07777;
  if (kind == CredentialKind::kSecret && (mode & 077) != 0) {
    return fmt::format("is accessible by group or others (mode {:04o}); a secret must be private: chmod 600 it", mode);
  }
  if ((mode & 022) != 0) {
    return fmt::format("is writable by group or others (mode {:04o}): chmod go-w it", mode);
  }
  if (st.st_size <= 0) return "is empty";
  if (static_cast<uint64_t>(st.st_size) > kMaxCredentialFileBytes) {
    return fmt::format("holds {} bytes, more than the {} a credential file may have", st.st_size,
                       kMaxCredentialFileBytes);
  }
  return "";
}

}  // namespace

std::optional<std::string> read_credential_file(const std::string& path, CredentialKind kind, const std::string& what,
                                                std::string* error) {
  std::string out;
  const CarefulRead r = read_carefully(
      path, kMaxCredentialFileBytes,
      [kind](const struct stat& st, bool via_symlink) { return judge(st, via_symlink, kind); }, &out);
  std::string why;
  switch (r.outcome) {
    case CarefulRead::Outcome::kOk:
      if (!out.empty()) return out;
      why = "is empty";
      break;
    case CarefulRead::Outcome::kSystemError: why = std::strerror(r.error); break;
    case CarefulRead::Outcome::kRefused: why = r.reason; break;
    case CarefulRead::Outcome::kGrew: why = "grew while it was read"; break;
  }
  *error = fmt::format("{} {}: {}", what, path, why);
  return std::nullopt;
}

bool is_credential_reference(const std::string& value, std::string* name) {
  if (value.rfind(kCredentialPrefix, 0) != 0) return false;
  *name = value.substr(kCredentialPrefix.size());
  return true;
}

bool valid_credential_name(const std::string& name) {
  return !name.empty() && name.size() <= 255 && name != "." && name != ".." &&
         name.find_first_of(std::string_view("/\0", 2)) == std::string::npos;
}

std::optional<std::string> credential_path(const std::string& value, std::string* error) {
  std::string name;
  if (!is_credential_reference(value, &name)) return value;
  const char* dir = std::getenv("CREDENTIALS_DIRECTORY");
  if (dir == nullptr || *dir == '\0') {
    *error = fmt::format(
        "names the systemd credential '{}', but $CREDENTIALS_DIRECTORY is not set: the unit needs "
        "LoadCredential={}:/path/to/file (docs/operations.md)",
        name, name);
    return std::nullopt;
  }
  return std::string(dir) + "/" + name;
}

FileStamp stamp_of(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return {};
  return {static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino), static_cast<int64_t>(st.st_size),
          static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec};
}

}  // namespace rdmad::config
