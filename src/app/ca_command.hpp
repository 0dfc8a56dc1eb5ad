#pragma once

#include <string>

namespace sandgate::app {

// `sandgate ca init DIR [--force]`: creates the interception CA in DIR and prints its files and
// fingerprint on stdout. Returns the exit code: 0 created, 1 refused or failed (message on
// stderr).
int run_ca_init(const std::string& dir, bool force);

}  // namespace sandgate::app
