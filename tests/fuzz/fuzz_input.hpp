#pragma once

// What the libFuzzer targets that build their cases from the input share: the fuzzer's bytes
// read front to back, and a check that aborts naming where it failed.

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

namespace sandgate::fuzz {

// Aborts, naming the file and line of the check that failed.
inline void check(bool ok, const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  if (ok) return;
  std::fprintf(stderr, "%s: check at line %d failed\n", file, line);
  std::abort();
}

// Reads the fuzzer's bytes front to back; zeros (and empty takes) once they run out.
struct Input {
  std::string_view rest;
  std::uint8_t byte() {
    if (rest.empty()) return 0;
    const auto b = static_cast<std::uint8_t>(rest.front());
    rest.remove_prefix(1);
    return b;
  }
  std::string_view take(std::size_t n) {
    const std::string_view out = rest.substr(0, n);
    rest.remove_prefix(out.size());
    return out;
  }
  template <std::size_t N>
  std::string_view pick(const std::string_view (&from)[N]) {
    return from[byte() % N];
  }
};

}  // namespace sandgate::fuzz
