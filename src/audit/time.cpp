#include "audit/time.hpp"

#include <array>
#include <cstdio>

namespace sandgate::audit {

namespace {

// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's days_from_civil).
std::int64_t days_from_civil(std::int64_t y, unsigned m, unsigned d) {
  y -= m <= 2 ? 1 : 0;
  const std::int64_t era = (y >= 0 ? y : y - 399) / 400;
  const auto yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<std::int64_t>(doe) - 719468;
}

struct Civil {
  std::int64_t y;
  unsigned m, d;
};
Civil civil_from_days(std::int64_t z) {
  z += 719468;
  const std::int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const auto doe = static_cast<unsigned>(z - era * 146097);
  const unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const unsigned mp = (5 * doy + 2) / 153;
  const unsigned d = doy - (153 * mp + 2) / 5 + 1;
  const unsigned m = mp < 10 ? mp + 3 : mp - 9;
  return {static_cast<std::int64_t>(yoe) + era * 400 + (m <= 2 ? 1 : 0), m, d};
}

bool digit(char c) {
  return c >= '0' && c <= '9';
}

// n digits at s[at...] as a number; false if any is not a digit.
bool digits(std::string_view s, std::size_t at, std::size_t n, unsigned& out) {
  if (at + n > s.size()) return false;
  out = 0;
  for (std::size_t i = at; i < at + n; ++i) {
    if (!digit(s[i])) return false;
    out = out * 10 + static_cast<unsigned>(s[i] - '0');
  }
  return true;
}

bool leap(unsigned y) {
  return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

unsigned days_in_month(unsigned y, unsigned m) {
  static constexpr std::array<unsigned, 12> kDays{31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  return m == 2 && leap(y) ? 29 : kDays[m - 1];
}

}  // namespace

std::optional<std::int64_t> parse_rfc3339_ms(std::string_view s) {
  unsigned year = 0, month = 0, day = 0;
  if (!digits(s, 0, 4, year) || s.size() < 10 || s[4] != '-' || !digits(s, 5, 2, month) ||
      s[7] != '-' || !digits(s, 8, 2, day)) {
    return std::nullopt;
  }
  if (month < 1 || month > 12 || day < 1 || day > days_in_month(year, month)) return std::nullopt;
  const std::int64_t days = days_from_civil(year, month, day);
  if (s.size() == 10) return days * 86'400'000;

  unsigned hour = 0, minute = 0, second = 0;
  if ((s[10] != 'T' && s[10] != 't' && s[10] != ' ') || !digits(s, 11, 2, hour) || s.size() < 19 ||
      s[13] != ':' || !digits(s, 14, 2, minute) || s[16] != ':' || !digits(s, 17, 2, second)) {
    return std::nullopt;
  }
  if (hour > 23 || minute > 59 || second > 60) return std::nullopt;  // 60: a leap second
  std::size_t at = 19;
  unsigned millis = 0;
  if (at < s.size() && s[at] == '.') {
    ++at;
    const std::size_t start = at;
    while (at < s.size() && digit(s[at])) {
      if (at - start < 3) millis = millis * 10 + static_cast<unsigned>(s[at] - '0');
      ++at;
    }
    if (at == start) return std::nullopt;
    for (std::size_t n = at - start; n < 3; ++n) millis *= 10;
  }
  std::int64_t offset_minutes = 0;
  if (at < s.size() && (s[at] == 'Z' || s[at] == 'z')) {
    ++at;
  } else if (at < s.size() && (s[at] == '+' || s[at] == '-')) {
    unsigned oh = 0, om = 0;
    if (!digits(s, at + 1, 2, oh) || at + 3 >= s.size() || s[at + 3] != ':' ||
        !digits(s, at + 4, 2, om) || oh > 23 || om > 59) {
      return std::nullopt;
    }
    offset_minutes = (s[at] == '+' ? 1 : -1) * static_cast<std::int64_t>(oh * 60 + om);
    at += 6;
  } else {
    return std::nullopt;
  }
  if (at != s.size()) return std::nullopt;
  const std::int64_t secs = days * 86'400 + hour * 3600 + minute * 60 + second;
  return (secs - offset_minutes * 60) * 1000 + millis;
}

std::optional<std::int64_t> parse_duration_ms(std::string_view s) {
  if (s.empty()) return std::nullopt;
  std::int64_t total = 0;
  while (!s.empty()) {
    std::size_t n = 0;
    std::int64_t value = 0;
    while (n < s.size() && digit(s[n])) {
      if (value > 1'000'000'000) return std::nullopt;  // far past any log's age
      value = value * 10 + (s[n] - '0');
      ++n;
    }
    if (n == 0) return std::nullopt;
    s.remove_prefix(n);
    std::int64_t unit = 0;
    if (s.starts_with("ms")) {
      unit = 1;
      s.remove_prefix(2);
    } else if (!s.empty()) {
      switch (s.front()) {
        case 's':
          unit = 1000;
          break;
        case 'm':
          unit = 60'000;
          break;
        case 'h':
          unit = 3'600'000;
          break;
        case 'd':
          unit = 86'400'000;
          break;
        case 'w':
          unit = 7 * 86'400'000LL;
          break;
        default:
          return std::nullopt;
      }
      s.remove_prefix(1);
    } else {
      return std::nullopt;  // a number needs its unit
    }
    total += value * unit;
  }
  return total;
}

std::optional<std::int64_t> parse_time_arg(std::string_view text, std::int64_t now_ms) {
  if (auto t = parse_rfc3339_ms(text)) return t;
  if (auto d = parse_duration_ms(text)) return now_ms - *d;
  return std::nullopt;
}

std::string format_rfc3339_ms(std::int64_t ms) {
  std::int64_t days = ms / 86'400'000;
  std::int64_t rest = ms % 86'400'000;
  if (rest < 0) {
    rest += 86'400'000;
    --days;
  }
  const Civil c = civil_from_days(days);
  const auto secs = rest / 1000;
  std::array<char, 40> buf{};
  std::snprintf(buf.data(), buf.size(), "%04lld-%02u-%02uT%02lld:%02lld:%02lld.%03lldZ",
                static_cast<long long>(c.y), c.m, c.d, static_cast<long long>(secs / 3600),
                static_cast<long long>(secs / 60 % 60), static_cast<long long>(secs % 60),
                static_cast<long long>(rest % 1000));
  return buf.data();
}

}  // namespace sandgate::audit
