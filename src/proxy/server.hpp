#pragma once

#include <memory>

#include "config/config.hpp"

namespace sandgate::proxy {

// The daemon: binds the listeners, runs one io_context per worker thread, and serves until
// SIGINT or SIGTERM. SIGHUP reloads the config (kept on error), SIGUSR1 reopens the audit
// log. Prints one JSON "ready" line on stderr with the bound addresses. Returns the process
// exit code.
int run_server(std::shared_ptr<const config::Config> cfg);

}  // namespace sandgate::proxy
