#pragma once

#include <string>

#include "config/config.hpp"

namespace sandgate::app {

// `sandgate decide`: one decision as one JSON line on stdout. Returns the process exit code:
// 0 allow, 3 deny, 2 usage error (message on stderr).
int run_decide(const config::Config& cfg, const std::string& sandbox, const std::string& target);

}  // namespace sandgate::app
