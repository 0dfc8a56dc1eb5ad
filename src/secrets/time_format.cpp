#include <charconv>
#include <ctime>

#include "secrets/provider.hpp"

namespace sandgate::secrets {

namespace {

bool digits(std::string_view text, std::size_t at, std::size_t n, int& out) {
  if (at + n > text.size()) return false;
  const auto [end, ec] = std::from_chars(text.data() + at, text.data() + at + n, out);
  return ec == std::errc() && end == text.data() + at + n;
}

}  // namespace

std::optional<TimePoint> parse_rfc3339(std::string_view text) {
  // YYYY-MM-DDTHH:MM:SS[.frac](Z|+HH:MM|-HH:MM)
  int year = 0, month = 0, day = 0, hour = 0, minute = 0, second = 0;
  if (text.size() < 20 || !digits(text, 0, 4, year) || text[4] != '-' ||
      !digits(text, 5, 2, month) || text[7] != '-' || !digits(text, 8, 2, day) ||
      (text[10] != 'T' && text[10] != 't' && text[10] != ' ') || !digits(text, 11, 2, hour) ||
      text[13] != ':' || !digits(text, 14, 2, minute) || text[16] != ':' ||
      !digits(text, 17, 2, second)) {
    return std::nullopt;
  }
  if (month < 1 || month > 12 || day < 1 || day > 31 || hour > 23 || minute > 59 || second > 60) {
    return std::nullopt;
  }
  std::size_t at = 19;
  if (at < text.size() && text[at] == '.') {
    ++at;
    const std::size_t start = at;
    while (at < text.size() && text[at] >= '0' && text[at] <= '9') ++at;
    if (at == start) return std::nullopt;
  }
  int offset_minutes = 0;
  if (at < text.size() && (text[at] == 'Z' || text[at] == 'z')) {
    ++at;
  } else if (at < text.size() && (text[at] == '+' || text[at] == '-')) {
    int oh = 0, om = 0;
    if (!digits(text, at + 1, 2, oh) || at + 3 >= text.size() || text[at + 3] != ':' ||
        !digits(text, at + 4, 2, om) || oh > 23 || om > 59) {
      return std::nullopt;
    }
    offset_minutes = (oh * 60 + om) * (text[at] == '-' ? -1 : 1);
    at += 6;
  } else {
    return std::nullopt;
  }
  if (at != text.size()) return std::nullopt;
  std::tm tm{};
  tm.tm_year = year - 1900;
  tm.tm_mon = month - 1;
  tm.tm_mday = day;
  tm.tm_hour = hour;
  tm.tm_min = minute;
  tm.tm_sec = second == 60 ? 59 : second;
  const std::time_t t = ::timegm(&tm);
  if (t == static_cast<std::time_t>(-1)) return std::nullopt;
  return WallClock::from_time_t(t) - std::chrono::minutes(offset_minutes);
}

}  // namespace sandgate::secrets
