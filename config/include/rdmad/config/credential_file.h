#pragma once
// Credential files (the peer channel's pre-shared key, private key, certificate and CA bundle) are
// read with care, because a path in a config file can name anything: a directory (reading it threw
// and aborted the daemon), /dev/zero (read without end), a FIFO (open blocked start-up forever) or
// a key others can read. A credential must be a regular file (a symlink to one is fine: Kubernetes
// mounts Secrets that way) of 1 byte to 1 MiB, owned by root or the daemon's effective uid, and
// not writable by group or others; a secret must not be readable by them either. The checks run
// on the open descriptor (no race with a swapped path), the open never blocks (O_NONBLOCK), and
// nothing but a regular file is ever opened. `--check-config`, start-up and credential reloads
// all use this one reader.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace rdmad::config {

enum class CredentialKind : uint8_t {
  kSecret,  // a private key or pre-shared key: mode must not give group or others any access
  kPublic,  // a certificate or CA bundle: others may read it, but not write it
};

inline constexpr size_t kMaxCredentialFileBytes = size_t{1} << 20;

// A credential setting (tls_ca_file, tls_cert_file, tls_key_file, key_file) is an absolute path or
// "credential:NAME": the systemd credential NAME, i.e. $CREDENTIALS_DIRECTORY/NAME, which systemd
// fills from LoadCredential=NAME:/etc/rdmad/peer.key before the service starts, readable by the
// service's user (User=rdmad) however the source file's owner and mode are (docs/operations.md).
inline constexpr std::string_view kCredentialPrefix = "credential:";

/// True when `value` is "credential:NAME" (*name = NAME).
bool is_credential_reference(const std::string& value, std::string* name);
/// A credential name systemd accepts: 1..255 bytes, no '/', not "." or "..".
bool valid_credential_name(const std::string& name);
/// The path a credential setting names: `value` itself, or $CREDENTIALS_DIRECTORY/NAME for
/// "credential:NAME". nullopt with *error when $CREDENTIALS_DIRECTORY is not set.
std::optional<std::string> credential_path(const std::string& value, std::string* error);

/// The file's contents, or nullopt with `error` saying what is wrong with it ("key file
/// /etc/rdmad/peer.key: is a directory, not a regular file"). `what` names the file's role.
std::optional<std::string> read_credential_file(const std::string& path, CredentialKind kind, const std::string& what,
                                                std::string* error);

/// What identifies a file's current version (for noticing a rotated certificate): device, inode,
/// size and modification time of what the path names now; all zero when it cannot be looked up.
struct FileStamp {
  uint64_t dev = 0;
  uint64_t ino = 0;
  int64_t size = 0;
  int64_t mtime_ns = 0;
  bool operator==(const FileStamp&) const = default;
};
FileStamp stamp_of(const std::string& path);

}  // namespace rdmad::config
