#pragma once

#include <algorithm>
#include <array>
#include <string_view>

namespace sandgate {

// An ASCII letter in lower case; any other byte as it is.
constexpr char lower_ascii(char c) {
  return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
}

// The value of a hex digit (either case), or -1.
constexpr int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

// Without the optional whitespace (SP, HTAB) around it: a field value, a list member.
constexpr std::string_view trim_ows(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// ASCII case-insensitive equality, for header names, schemes and hosts. Use this, not
// boost::beast::iequals: Boost 1.81's reads one byte past the end of both strings whenever
// they differ only in case (its slow loop loads the next pair before testing the count), which
// request_head_fuzz found as a heap overflow on a target "htTp://" that ends its buffer.
inline bool iequals_ascii(std::string_view a, std::string_view b) {
  return std::ranges::equal(a, b, [](char x, char y) { return lower_ascii(x) == lower_ascii(y); });
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
