#pragma once

// The sandgate-launch verbs. Each returns the process exit code or throws LaunchError.

#include "launcher/cli.hpp"

namespace sandgate::launcher {

// Loads the config named by options and runs the verb.
int run_command(const Options& options);

}  // namespace sandgate::launcher
