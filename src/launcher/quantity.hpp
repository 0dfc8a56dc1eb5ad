#pragma once

// Parsers for the quantities `run` takes on its command line (pure): durations (--timeout,
// --kill-after), byte sizes (--memory) and counts (--pids). Each returns nullopt with a
// one-line reason in *error.

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace sandgate::launcher {

// "30s", "5m", "1500ms", "2h", "1.5s", or plain seconds ("30", "0.5"), as timeout(1) takes
// them. Rounded up to whole milliseconds (a deadline never comes early). At most 100 days.
std::optional<std::chrono::milliseconds> parse_duration(std::string_view text, std::string* error);

// Bytes: a whole number with an optional binary suffix K, M, G, T (also KiB/KB, MiB/MB, ...,
// any case: all 1024-based, as cgroups and systemd count). "512M", "1G", "1048576".
std::optional<std::uint64_t> parse_size(std::string_view text, std::string* error);

// A whole number >= 1 ("64").
std::optional<std::uint64_t> parse_count(std::string_view text, std::string* error);

}  // namespace sandgate::launcher
