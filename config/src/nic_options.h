#pragma once
// The [[nic]] keys generated from the built-in backends' option tables.
#include <vector>

#include "rdmad/config/field.h"

namespace rdmad::config {

/// Adds one [[nic]] field per option of the built-in backends (an option several backends have is
/// one key), except the derived ones (derived_nic_options).
void add_backend_option_fields(std::vector<Field>& f);

}  // namespace rdmad::config
