#pragma once
// The transport interface speaks base's Status and Result (one status set for the project).
#include "rdmad/base/result.h"
#include "rdmad/base/status.h"

namespace rdmad::verbs {

using base::Result;
using base::Status;
using base::StatusCode;
using base::to_string;

}  // namespace rdmad::verbs
