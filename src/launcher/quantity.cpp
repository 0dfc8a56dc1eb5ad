#include "launcher/quantity.hpp"

#include <array>
#include <cctype>
#include <limits>
#include <utility>

namespace sandgate::launcher {
namespace {

constexpr std::uint64_t kMaxDurationMs = 100ULL * 24 * 3600 * 1000;

template <class T>
std::optional<T> fail(std::string* error, std::string message) {
  if (error != nullptr) *error = std::move(message);
  return std::nullopt;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Leading digits of `text` as a number (nullopt on overflow); *used how many characters.
std::optional<std::uint64_t> leading_number(std::string_view text, std::size_t* used) {
  std::uint64_t value = 0;
  std::size_t i = 0;
  for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i) {
    const auto digit = static_cast<std::uint64_t>(text[i] - '0');
    if (value > (std::numeric_limits<std::uint64_t>::max() - digit) / 10) return std::nullopt;
    value = value * 10 + digit;
  }
  *used = i;
  return value;
}

}  // namespace

std::optional<std::chrono::milliseconds> parse_duration(std::string_view text, std::string* error) {
  using R = std::chrono::milliseconds;
  const std::string shown = "\"" + std::string(text) + "\"";
  std::size_t used = 0;
  const auto whole = leading_number(text, &used);
  if (!whole || used == 0) {
    return fail<R>(error, "invalid duration " + shown + ": use a number with ms, s, m or h (30s)");
  }
  // Up to 9 decimals after a point, kept as a fraction frac / scale.
  std::uint64_t frac = 0;
  std::uint64_t scale = 1;
  std::string_view rest = text.substr(used);
  if (rest.starts_with('.')) {
    std::size_t digits = 0;
    rest.remove_prefix(1);
    while (digits < rest.size() && rest[digits] >= '0' && rest[digits] <= '9') {
      if (digits == 9) return fail<R>(error, "invalid duration " + shown + ": too many decimals");
      frac = frac * 10 + static_cast<std::uint64_t>(rest[digits] - '0');
      scale *= 10;
      ++digits;
    }
    if (digits == 0) return fail<R>(error, "invalid duration " + shown + ": a digit after '.'");
    rest.remove_prefix(digits);
  }
  const std::string unit = lower(rest);
  std::uint64_t unit_ms = 0;
  if (unit.empty() || unit == "s") {
    unit_ms = 1000;
  } else if (unit == "ms") {
    unit_ms = 1;
  } else if (unit == "m") {
    unit_ms = 60'000;
  } else if (unit == "h") {
    unit_ms = 3'600'000;
  } else {
    return fail<R>(error, "invalid duration " + shown + ": unknown unit \"" + std::string(rest) +
                              "\" (use ms, s, m or h)");
  }
  if (*whole > kMaxDurationMs / unit_ms) {
    return fail<R>(error, "duration " + shown + " is too long (at most 100 days)");
  }
  std::uint64_t ms = *whole * unit_ms;
  ms += (frac * unit_ms + scale - 1) / scale;  // rounded up
  if (ms > kMaxDurationMs)
    return fail<R>(error, "duration " + shown + " is too long (at most 100 days)");
  return R(static_cast<R::rep>(ms));
}

std::optional<std::uint64_t> parse_size(std::string_view text, std::string* error) {
  const std::string shown = "\"" + std::string(text) + "\"";
  std::size_t used = 0;
  const auto number = leading_number(text, &used);
  if (!number || used == 0) {
    return fail<std::uint64_t>(
        error, "invalid size " + shown + ": use a whole number of bytes with K, M or G (512M)");
  }
  const std::string unit = lower(text.substr(used));
  static const std::array<std::pair<const char*, int>, 13> kUnits = {{{"", 0},
                                                                      {"b", 0},
                                                                      {"k", 1},
                                                                      {"kb", 1},
                                                                      {"kib", 1},
                                                                      {"m", 2},
                                                                      {"mb", 2},
                                                                      {"mib", 2},
                                                                      {"g", 3},
                                                                      {"gb", 3},
                                                                      {"gib", 3},
                                                                      {"t", 4},
                                                                      {"tib", 4}}};
  int power = -1;
  for (const auto& [name, p] : kUnits) {
    if (unit == name) power = p;
  }
  if (power < 0) {
    return fail<std::uint64_t>(error, "invalid size " + shown + ": unknown unit \"" +
                                          std::string(text.substr(used)) + "\" (use K, M, G or T)");
  }
  std::uint64_t bytes = *number;
  for (int i = 0; i < power; ++i) {
    if (bytes > std::numeric_limits<std::uint64_t>::max() / 1024) {
      return fail<std::uint64_t>(error, "size " + shown + " is too large");
    }
    bytes *= 1024;
  }
  return bytes;
}

std::optional<std::uint64_t> parse_count(std::string_view text, std::string* error) {
  std::size_t used = 0;
  const auto number = leading_number(text, &used);
  if (!number || used == 0 || used != text.size() || *number == 0) {
    return fail<std::uint64_t>(
        error, "invalid count \"" + std::string(text) + "\": use a whole number >= 1");
  }
  return number;
}

}  // namespace sandgate::launcher
