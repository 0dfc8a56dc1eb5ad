#pragma once

#include <algorithm>
#include <string_view>

namespace sandgate {

// ASCII case-insensitive equality, for header names, schemes and hosts. Use this, not
// boost::beast::iequals: Boost 1.81's reads one byte past the end of both strings whenever
// they differ only in case (its slow loop loads the next pair before testing the count), which
// request_head_fuzz found as a heap overflow on a target "htTp://" that ends its buffer.
inline bool iequals_ascii(std::string_view a, std::string_view b) {
  constexpr auto lower = [](char c) {
    return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
  };
  return std::ranges::equal(a, b, [&](char x, char y) { return lower(x) == lower(y); });
}

}  // namespace sandgate
