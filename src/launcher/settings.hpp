#pragma once

#include "config/config.hpp"
#include "launcher/sandbox.hpp"

namespace sandgate::launcher {

// Loads the daemon's config file. With `for_create`, also checks what creating a sandbox needs:
// wildcard IPv4 transparent and DNS listeners with fixed ports, an admin listener and a
// sandboxes_dir. Throws LaunchError (exit code 2) naming the key to fix.
Settings load_settings(const std::string& config_path, bool for_create);

// The checks of load_settings on an already loaded config (tests).
Settings settings_from_config(const config::Config& config, bool for_create);

}  // namespace sandgate::launcher
