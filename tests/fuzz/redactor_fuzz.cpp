// libFuzzer target for the response redactor (secrets::Redactor) as it streams. The input picks
// the needles (from a small set of awkward ones, or bytes of the input), a split of the body
// into chunks (some empty), and the body. A reference written plainly here finds every
// occurrence in the whole body at once, by the rules redactor.hpp states: a needle's bytes as
// they are, or each of its characters as itself or as an escape spelling it (JSON \/ \\ \" and
// \uXXXX below 0x80, percent %XX, HTML &#DDD; &#xHHH; with 1 to 7 digits below 0x80 and the
// named references), an escape preferred where it spells the next character (no
// backtracking). Aborts unless the streamed output, and redact() of the whole, are the body
// with exactly the bytes of those occurrences replaced by the filler, unless the counts of
// occurrences agree, and unless what feed() holds back stays within the longest needle's
// longest spelling.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_input.hpp"
#include "secrets/redactor.hpp"

namespace {

namespace secrets = sandgate::secrets;

using sandgate::fuzz::check;
using sandgate::fuzz::Input;

// Needles that escapes can spell, that begin with an escape character, that overlap
// themselves, or that hold what a percent or HTML escape is made of.
const std::string_view kNeedles[] = {"tok+en/1=", "s3cr&t", "%41b", "a\\\"b", "abab",
                                     "x",         "&amp;",  "q/=q", "%2525",  "Zz;"};

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// The escape at text[at], plainly: its length (0: none) and the character it stands for.
struct Spelled {
  std::size_t length = 0;
  char ch = 0;
};

Spelled reference_escape(std::string_view t, std::size_t at) {
  const std::size_t n = t.size();
  if (t[at] == '\\' && at + 1 < n) {
    const char c = t[at + 1];
    if (c == '/' || c == '\\' || c == '"') return {2, c};
    if (c == 'u' && at + 6 <= n) {
      int v = 0;
      for (std::size_t i = at + 2; i < at + 6; ++i) {
        if (hex_digit(t[i]) < 0) return {};
        v = v * 16 + hex_digit(t[i]);
      }
      if (v < 0x80) return {6, static_cast<char>(v)};
    }
    return {};
  }
  if (t[at] == '%' && at + 3 <= n && hex_digit(t[at + 1]) >= 0 && hex_digit(t[at + 2]) >= 0) {
    return {3, static_cast<char>(hex_digit(t[at + 1]) * 16 + hex_digit(t[at + 2]))};
  }
  if (t[at] != '&') return {};
  std::size_t i = at + 1;
  if (i < n && t[i] == '#') {
    ++i;
    const bool hex = i < n && (t[i] == 'x' || t[i] == 'X');
    if (hex) ++i;
    const std::size_t from = i;
    long v = 0;
    while (i < n && (hex ? hex_digit(t[i]) >= 0 : (t[i] >= '0' && t[i] <= '9'))) {
      if (i - from < 8) v = v * (hex ? 16 : 10) + (hex ? hex_digit(t[i]) : t[i] - '0');
      ++i;
    }
    const std::size_t digits = i - from;
    if (digits < 1 || digits > 7 || i >= n || t[i] != ';' || v >= 0x80) return {};
    return {i + 1 - at, static_cast<char>(v)};
  }
  const std::size_t from = i;
  while (i < n && ((t[i] >= 'a' && t[i] <= 'z') || (t[i] >= 'A' && t[i] <= 'Z'))) ++i;
  if (i >= n || t[i] != ';') return {};
  static const std::pair<std::string_view, char> kNamed[] = {
      {"amp", '&'},    {"lt", '<'},     {"gt", '>'},     {"quot", '"'},   {"apos", '\''},
      {"sol", '/'},    {"plus", '+'},   {"equals", '='}, {"lowbar", '_'}, {"period", '.'},
      {"colon", ':'},  {"semi", ';'},   {"comma", ','},  {"excl", '!'},   {"num", '#'},
      {"dollar", '$'}, {"percnt", '%'}, {"ast", '*'},    {"commat", '@'}, {"lpar", '('},
      {"rpar", ')'},   {"lsqb", '['},   {"rsqb", ']'},   {"lcub", '{'},   {"rcub", '}'},
      {"verbar", '|'}, {"quest", '?'},  {"bsol", '\\'},  {"Hat", '^'},    {"grave", '`'},
      {"dash", '-'},   {"hyphen", '-'}};
  const std::string_view name = t.substr(from, i - from);
  for (const auto& [known, ch] : kNamed) {
    if (known == name) return {i + 1 - at, ch};
  }
  return {};
}

// One past the end of an occurrence of `needle` at text[at], or 0 when there is none.
std::size_t reference_occurrence(std::string_view needle, std::string_view t, std::size_t at) {
  if (t.substr(at).starts_with(needle)) return at + needle.size();
  std::size_t pos = at;
  for (const char c : needle) {
    if (pos >= t.size()) return 0;
    const Spelled e = reference_escape(t, pos);
    if (e.length > 0 && e.ch == c) {
      pos += e.length;
    } else if (t[pos] == c) {
      ++pos;
    } else {
      return 0;
    }
  }
  return pos;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  Input in{{reinterpret_cast<const char*>(data), size}};
  // The needles: 1 to 3 of them, each from the set or made of the input's bytes.
  const std::uint8_t shape = in.byte();
  std::vector<std::string> needles;
  for (int i = 0, count = 1 + shape % 3; i < count; ++i) {
    const std::uint8_t pick = in.byte();
    if (pick < 160) {
      needles.emplace_back(kNeedles[pick % std::size(kNeedles)]);
    } else {
      needles.emplace_back(in.take(1 + pick % 12));
    }
  }
  // The chunk sizes (0 to 63, used in turn), then the body.
  std::vector<std::size_t> steps;
  for (int i = 0, count = 1 + (shape >> 4); i < count; ++i) steps.push_back(in.byte() % 64);
  if (std::all_of(steps.begin(), steps.end(), [](std::size_t s) { return s == 0; })) {
    steps.push_back(1);  // empty chunks, but the body still ends
  }
  const std::string_view body = in.rest;

  // The reference: every occurrence of every needle in the whole body.
  std::string expected(body);
  std::size_t occurrences = 0;
  std::size_t longest = 0;
  for (const std::string& needle : needles) {
    longest = std::max(longest, needle.size());
    if (needle.empty()) continue;
    for (std::size_t at = 0; at < body.size(); ++at) {
      const std::size_t end = reference_occurrence(needle, body, at);
      if (end == 0) continue;
      ++occurrences;
      std::fill(expected.begin() + static_cast<std::ptrdiff_t>(at),
                expected.begin() + static_cast<std::ptrdiff_t>(end), secrets::Redactor::kFiller);
    }
  }

  secrets::Redactor whole(needles);
  check(whole.redact(body) == expected);
  check(whole.redactions() == occurrences);

  secrets::Redactor streamed(needles);
  std::string out;
  std::size_t at = 0;
  for (std::size_t i = 0; at < body.size(); ++i) {
    const std::size_t n = std::min(steps[i % steps.size()], body.size() - at);
    out += streamed.feed(body.substr(at, n));
    at += n;
    check(out.size() + streamed.held() == at);
    check(streamed.held() <= longest * secrets::Redactor::kMaxSpelling);
  }
  out += streamed.finish();
  check(streamed.held() == 0);
  check(out == expected);
  check(streamed.redactions() == occurrences);
  return 0;
}
