#pragma once

#include <cstdint>
#include <optional>
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
//   holds revoke SANDBOX [HOST:PORT]         end the sandbox's grants (all, or one)
//   holds watch [--sandbox ID] [--json]      one line per hold that begins or ends
// --admin ADDRESS:PORT names the listener when the config's is not where it answers (port 0).
// Returns the exit code: 0 done, 1 the daemon refused or was not reached, 2 usage.
int run_holds(const config::Config& cfg, std::vector<std::string> args);

// Where a running daemon's admin listener answers, for the commands that ask it.
struct AdminAddress {
  std::string host;  // an IP literal
  std::uint16_t port = 0;
};
// `given` (ADDRESS:PORT, from --admin: the listener as bound, when the config says port 0 or a
// wildcard) when not empty; else the config's listener (loopback for a wildcard one). nullopt
// with *error when neither names one, or `given` is malformed.
std::optional<AdminAddress> admin_address(const config::Config& cfg, const std::string& given,
                                          std::string* error);

}  // namespace sandgate::app
