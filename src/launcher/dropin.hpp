#pragma once

// The drop-in file that registers a launcher sandbox with the daemon (<sandboxes_dir>/<id>.toml).

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config/config.hpp"

namespace sandgate::launcher {

// First line of every drop-in the launcher writes; `gc` removes only files that start with it.
// The daemon knows it too (config::Sandbox::launcher_made: its denial suggestions).
inline constexpr std::string_view kDropinMarker = config::kLauncherDropinMarker;

// The file's text: the marker, then id, profile (when given), sources = [sandbox_ip] and allow.
std::string dropin_text(std::string_view id, const std::optional<std::string>& profile,
                        std::string_view sandbox_ip, const std::vector<std::string>& allow);

// Whether `text` (a file's content) was written by the launcher.
bool is_launcher_dropin(std::string_view text);

}  // namespace sandgate::launcher
