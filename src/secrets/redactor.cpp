#include "secrets/redactor.hpp"

#include <algorithm>
#include <optional>

#include "common/ascii.hpp"
#include "secrets/secret_bytes.hpp"

namespace sandgate::secrets {

namespace {

std::ptrdiff_t as_offset(std::size_t n) {
  return static_cast<std::ptrdiff_t>(n);
}

// The escape that starts at text[at], if there is one: the character it stands for and its
// length; `incomplete` when text ends before that can be told.
struct Escape {
  std::size_t length = 0;  // 0: none
  char ch = 0;
  bool incomplete = false;
};

// HTML named references for the ASCII punctuation a token may hold (HTML's own list).
struct Named {
  std::string_view name;
  char ch;
};
constexpr Named kNamed[] = {{"amp", '&'},    {"lt", '<'},     {"gt", '>'},     {"quot", '"'},
                            {"apos", '\''},  {"sol", '/'},    {"plus", '+'},   {"equals", '='},
                            {"lowbar", '_'}, {"period", '.'}, {"colon", ':'},  {"semi", ';'},
                            {"comma", ','},  {"excl", '!'},   {"num", '#'},    {"dollar", '$'},
                            {"percnt", '%'}, {"ast", '*'},    {"commat", '@'}, {"lpar", '('},
                            {"rpar", ')'},   {"lsqb", '['},   {"rsqb", ']'},   {"lcub", '{'},
                            {"rcub", '}'},   {"verbar", '|'}, {"quest", '?'},  {"bsol", '\\'},
                            {"Hat", '^'},    {"grave", '`'},  {"dash", '-'},   {"hyphen", '-'}};
constexpr std::size_t kLongestName = 6;

// `count` hex digits from text[at]; nullopt when one is not hex; -1 when text ends first.
std::optional<int> hex_digits(std::string_view text, std::size_t at, std::size_t count) {
  int value = 0;
  for (std::size_t i = 0; i < count; ++i) {
    if (at + i >= text.size()) return -1;
    const int d = hex_value(text[at + i]);
    if (d < 0) return std::nullopt;
    value = value * 16 + d;
  }
  return value;
}

Escape json_escape(std::string_view text, std::size_t at) {
  if (at + 1 >= text.size()) return {0, 0, true};
  const char next = text[at + 1];
  if (next == '/' || next == '\\' || next == '"') return {2, next, false};
  if (next != 'u') return {};
  const auto value = hex_digits(text, at + 2, 4);
  if (!value) return {};
  if (*value < 0) return {0, 0, true};
  if (*value >= 0x80) return {};
  return {6, static_cast<char>(*value), false};
}

Escape percent_escape(std::string_view text, std::size_t at) {
  const auto value = hex_digits(text, at + 1, 2);
  if (!value) return {};
  if (*value < 0) return {0, 0, true};
  return {3, static_cast<char>(*value), false};
}

// &#DDD; &#xHHH; (at most 7 digits) or &name;.
Escape html_escape(std::string_view text, std::size_t at) {
  std::size_t i = at + 1;
  if (i >= text.size()) return {0, 0, true};
  if (text[i] == '#') {
    ++i;
    if (i >= text.size()) return {0, 0, true};
    const bool hex = text[i] == 'x' || text[i] == 'X';
    if (hex) ++i;
    const std::size_t digits_from = i;
    long value = 0;
    for (; i < text.size() && i - digits_from < 7; ++i) {
      const int d =
          hex ? hex_value(text[i]) : (text[i] >= '0' && text[i] <= '9' ? text[i] - '0' : -1);
      if (d < 0) break;
      value = value * (hex ? 16 : 10) + d;
    }
    if (i >= text.size()) return {0, 0, true};
    if (i == digits_from || text[i] != ';' || value >= 0x80) return {};
    return {i + 1 - at, static_cast<char>(value), false};
  }
  const std::size_t name_from = i;
  while (i < text.size() && i - name_from <= kLongestName &&
         ((text[i] >= 'a' && text[i] <= 'z') || (text[i] >= 'A' && text[i] <= 'Z'))) {
    ++i;
  }
  if (i >= text.size()) return {0, 0, true};
  if (text[i] != ';') return {};
  const std::string_view name = text.substr(name_from, i - name_from);
  for (const Named& n : kNamed) {
    if (n.name == name) return {i + 1 - at, n.ch, false};
  }
  return {};
}

Escape escape_at(std::string_view text, std::size_t at) {
  switch (text[at]) {
    case '\\':
      return json_escape(text, at);
    case '%':
      return percent_escape(text, at);
    case '&':
      return html_escape(text, at);
    default:
      return {};
  }
}

// Whether a spelling of `want` may begin with byte `c`: `want` itself or an escape.
bool spells_on(char c, char want) {
  return c == want || c == '\\' || c == '%' || c == '&';
}

enum class Outcome { no, yes, undecided };

// Whether `needle` occurs at text[at]: as it is, or spelled with escapes. On yes, `end` is
// one past its last byte. `at_end`: nothing follows text.
Outcome occurs_at(std::string_view needle, std::string_view text, std::size_t at, bool at_end,
                  std::size_t& end) {
  const std::string_view rest = text.substr(at);
  if (rest.starts_with(needle)) {
    end = at + needle.size();
    return Outcome::yes;
  }
  if (!at_end && rest.size() < needle.size() && needle.starts_with(rest)) {
    return Outcome::undecided;
  }
  std::size_t pos = at;
  for (const char c : needle) {
    if (pos >= text.size()) return at_end ? Outcome::no : Outcome::undecided;
    const Escape e = escape_at(text, pos);
    if (e.incomplete && !at_end) return Outcome::undecided;
    if (e.length > 0 && e.ch == c) {
      pos += e.length;
    } else if (text[pos] == c) {
      ++pos;
    } else {
      return Outcome::no;
    }
  }
  end = pos;
  return Outcome::yes;
}

}  // namespace

Redactor::Redactor(std::vector<std::string> needles) {
  for (std::string& needle : needles) {
    if (needle.empty()) continue;
    starts_[static_cast<unsigned char>(needle.front())] = true;
    needles_.push_back(std::move(needle));
  }
  if (!needles_.empty()) {
    starts_['\\'] = starts_['%'] = starts_['&'] = true;
  }
}

std::size_t Redactor::scan(std::string_view text, std::size_t from, bool at_end,
                           std::vector<Range>& found) const {
  for (std::size_t at = from; at < text.size(); ++at) {
    const char c = text[at];
    if (!starts_[static_cast<unsigned char>(c)]) continue;
    // What the bytes here spell, once for every needle: most candidates are an escape
    // character that begins no needle's spelling.
    const Escape e = escape_at(text, at);
    const bool maybe_escape = e.incomplete && !at_end;
    const std::size_t before = found.size();
    for (const std::string& needle : needles_) {
      if (needle.front() != c && !(e.length > 0 && e.ch == needle.front()) && !maybe_escape) {
        continue;
      }
      // The needle's first character as it is: the next byte must go on with it (most do not).
      if (e.length == 0 && !maybe_escape && needle.size() > 1 && at + 1 < text.size() &&
          !spells_on(text[at + 1], needle[1])) {
        continue;
      }
      std::size_t end = 0;
      const Outcome o = occurs_at(needle, text, at, at_end, end);
      if (o == Outcome::undecided) {
        found.resize(before);  // this start is decided again, whole, once more bytes came
        return at;
      }
      if (o == Outcome::yes) found.push_back({at, end});
    }
  }
  return text.size();
}

std::string Redactor::feed(std::string_view chunk) {
  if (needles_.empty()) return std::string(chunk);
  held_.append(chunk);
  const std::size_t before = pending_.size();
  next_ = scan(held_, next_, false, pending_);
  redactions_ += pending_.size() - before;
  // Bytes from the first undecided start on may be part of an occurrence the next chunk
  // completes; those before it are final, but for the occurrences that cover them.
  const std::size_t release = next_;
  std::string out = held_.substr(0, release);
  std::size_t kept = 0;
  for (const Range& r : pending_) {
    const std::size_t end = std::min(r.end, release);
    if (r.begin < end)
      std::fill(out.begin() + as_offset(r.begin), out.begin() + as_offset(end), kFiller);
    // What reaches into the held bytes stays pending, moved to their new offsets.
    if (r.end > release) pending_[kept++] = {std::max(r.begin, release) - release, r.end - release};
  }
  pending_.resize(kept);
  held_.erase(0, release);
  next_ = 0;
  return out;
}

std::string Redactor::finish() {
  const std::size_t before = pending_.size();
  scan(held_, next_, true, pending_);
  redactions_ += pending_.size() - before;
  std::string out = std::move(held_);
  for (const Range& r : pending_) {
    std::fill(out.begin() + as_offset(r.begin), out.begin() + as_offset(r.end), kFiller);
  }
  held_.clear();
  pending_.clear();
  next_ = 0;
  return out;
}

std::string Redactor::redact(std::string_view value) {
  std::string out(value);
  if (needles_.empty()) return out;
  std::vector<Range> found;
  scan(value, 0, true, found);
  for (const Range& r : found) {
    std::fill(out.begin() + as_offset(r.begin), out.begin() + as_offset(r.end), kFiller);
  }
  redactions_ += found.size();
  return out;
}

Redactor::~Redactor() {
  for (std::string& needle : needles_) cleanse(needle);
}

}  // namespace sandgate::secrets
