#pragma once
// --check-config's view of the file as another user: a child process with that user's ids loads it.
#include <sys/types.h>

#include <string>
#include <vector>

#include "rdmad/config/loader.h"

namespace rdmad::daemon {

struct FileFindings {
  std::string failure;  // the child could not run or become the user; the lists are then empty
  std::vector<std::string> errors;
  std::vector<std::string> warnings;
  std::vector<std::string> not_checked;
};

// The findings of config::load_file(path, options) (and of the environment's overrides) as they
// are for the caller.
FileFindings findings_of(const config::LoadResult& r);

// The same, loaded by a child process that took uid, gid and the supplementary groups of `user`
// first: what that user can and cannot read. Needs root.
FileFindings load_as_user(const std::string& path, const config::LoadOptions& options, const std::string& user,
                          uid_t uid, gid_t gid);

}  // namespace rdmad::daemon
