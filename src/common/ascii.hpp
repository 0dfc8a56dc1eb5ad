#pragma once

#include <algorithm>
#include <array>
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

// A set of bytes as a 256-entry table, built at compile time from a predicate: a membership
// test is one load, and all_of() a plain loop the compiler keeps inline (std::all_of over a
// function pointer is a call per byte). For the byte classes of hot parsers.
class ByteSet {
 public:
  template <class Pred>
  consteval explicit ByteSet(Pred in) {
    for (int i = 0; i < 256; ++i) table_[static_cast<std::size_t>(i)] = in(static_cast<char>(i));
  }
  constexpr bool contains(char c) const { return table_[static_cast<unsigned char>(c)]; }
  constexpr bool all_of(std::string_view s) const {
    for (const char c : s) {
      if (!contains(c)) return false;
    }
    return true;
  }

 private:
  std::array<bool, 256> table_{};
};

}  // namespace sandgate
