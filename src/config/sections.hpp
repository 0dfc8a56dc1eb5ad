#pragma once

// Internal to src/config: the daemon-wide sections of the main file ([listeners], [limits],
// [dns], [log]). Each reader starts from the defaults in config.hpp, overwrites what the
// file sets, and reports every problem to the ErrorSink.

#include <filesystem>

#include "config/config.hpp"
#include "config/toml_reader.hpp"

namespace sandgate::config::detail {

Listeners read_listeners(const toml::node& node, ErrorSink& sink);
Limits read_limits(const toml::node& node, ErrorSink& sink);
Dns read_dns(const toml::node& node, ErrorSink& sink);
// A relative audit file path is resolved against `base_dir` (the config file's directory).
Logging read_logging(const toml::node& node, const std::filesystem::path& base_dir,
                     ErrorSink& sink);

// [launcher]; relative paths are resolved against `base_dir`.
Launcher read_launcher(const toml::node& node, const std::filesystem::path& base_dir,
                       ErrorSink& sink);

// [interception]; relative paths are resolved against `base_dir`.
Interception read_interception(const toml::node& node, const std::filesystem::path& base_dir,
                               ErrorSink& sink);

// What an absent [listeners] table means: an explicit proxy on 127.0.0.1:3128, no admin.
Listeners default_listeners();

}  // namespace sandgate::config::detail
