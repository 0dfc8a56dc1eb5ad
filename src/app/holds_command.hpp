#pragma once

#include <string>
#include <vector>

#include "config/config.hpp"

namespace sandgate::app {

// `sandgate holds`: the destinations a running daemon holds for an answer (docs/policy.md,
// "Held destinations"), and answering one, through its admin listener (listeners.admin) with
// the token of listeners.admin_token_file:
//   holds [--json]                           list them (oldest first)
//   holds allow ID [--sandbox-wide [--ttl SECONDS]]
//   holds deny ID [--message TEXT]
//   holds watch [--sandbox ID] [--json]      one line per hold that begins or ends
// --admin ADDRESS:PORT names the listener when the config's is not where it answers (port 0).
// Returns the exit code: 0 done, 1 the daemon refused or was not reached, 2 usage.
int run_holds(const config::Config& cfg, std::vector<std::string> args);

}  // namespace sandgate::app
