#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace sandgate::audit {

// RFC 3339 date-time ("2026-12-02T13:53:06.123Z", "...+02:00", 'T' or ' ', any number of
// fraction digits, of which milliseconds are kept) to milliseconds since the Unix epoch, or
// a bare date ("2026-12-02", midnight UTC). nullopt for anything else.
std::optional<std::int64_t> parse_rfc3339_ms(std::string_view text);

// "1500ms", "90s", "15m", "2h", "7d", "1h30m" to milliseconds; nullopt when not that form.
std::optional<std::int64_t> parse_duration_ms(std::string_view text);

// A --since/--until value: an RFC 3339 time, or a duration counted back from `now_ms`.
std::optional<std::int64_t> parse_time_arg(std::string_view text, std::int64_t now_ms);

// Milliseconds since the epoch as "2026-12-02T13:53:06.123Z".
std::string format_rfc3339_ms(std::int64_t ms);

}  // namespace sandgate::audit
