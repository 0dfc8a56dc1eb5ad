#pragma once

#include <sys/types.h>

#include <optional>
#include <string>

namespace sandgate::app {

// `sandgate --check-config FILE [--user NAME]`: loads FILE as the daemon would, then checks
// what the daemon checks at start, for the user it will run as (NAME; default: the invoking
// user): the interception CA, each credential's files, the placeholder key (or the directory
// it will be made in), the audit log's signing key, launcher.ca_file and sandboxes_dir. Every
// problem is reported in one round on stderr; warnings (a sandbox that may reach nothing, an inject
// rule for a host its sandbox may not reach) and notes do not fail the check. Returns the exit
// code: 0 ok, 2 errors (a usage error too).
int run_check_config(const std::string& path, const std::optional<std::string>& user);

}  // namespace sandgate::app
