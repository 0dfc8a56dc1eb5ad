#include "policy/path.hpp"

#include <algorithm>

#include "common/ascii.hpp"

namespace sandgate::policy {

namespace {

bool is_unreserved(unsigned char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '.' || c == '_' || c == '~';
}

// RFC 3986 pchar without '%' and ';' (';' is ambiguous, '%' starts an escape).
bool is_plain_pchar(unsigned char c) {
  static constexpr std::string_view kOther = "!$&'()*+,=:@";
  return is_unreserved(c) || kOther.find(static_cast<char>(c)) != std::string_view::npos;
}

bool is_control(unsigned char c) {
  return c < 0x20 || c == 0x7f;
}

void append_escape(std::string& out, unsigned char c) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  out += '%';
  out += kHex[c >> 4];
  out += kHex[c & 0xf];
}

// Appends `raw` (one path, or one glob segment when `glob`: then '*' and '?' stay wildcards)
// in canonical form, setting `ambiguous` for what docs/policy.md lists.
void append_canonical(std::string& out, std::string_view raw, bool glob, bool& ambiguous) {
  const std::size_t start = out.size();
  for (std::size_t i = 0; i < raw.size(); ++i) {
    const auto c = static_cast<unsigned char>(raw[i]);
    if (c == '%') {
      const bool whole = i + 2 < raw.size();
      const int hi = whole ? hex_value(raw[i + 1]) : -1;
      const int lo = whole ? hex_value(raw[i + 2]) : -1;
      if (hi < 0 || lo < 0) {
        ambiguous = true;  // an invalid escape: servers reject, keep or decode it differently
        append_escape(out, c);
        continue;
      }
      const auto v = static_cast<unsigned char>(hi * 16 + lo);
      i += 2;
      if (is_unreserved(v)) {
        out += static_cast<char>(v);
        continue;
      }
      if (v == '/' || v == '\\' || v == ';' || is_control(v)) ambiguous = true;
      append_escape(out, v);
    } else if (c == '/' || is_plain_pchar(c) || (glob && c == '?')) {
      out += static_cast<char>(c);
    } else {
      if (c == '\\' || c == ';' || c == '#' || is_control(c)) ambiguous = true;
      append_escape(out, c);
    }
  }
  // "%25" before two hex digits, however they were spelt ("%252F", "%25%32F"): a server
  // that decodes twice sees another escape.
  for (auto at = out.find("%25", start); at != std::string::npos; at = out.find("%25", at + 1)) {
    if (at + 4 < out.size() && hex_value(out[at + 3]) >= 0 && hex_value(out[at + 4]) >= 0) {
      ambiguous = true;
    }
  }
}

// RFC 3986 5.2.4, step by step.
std::string remove_dot_segments(std::string_view in) {
  std::string out;
  out.reserve(in.size());
  const auto drop_last_segment = [&] {
    const auto slash = out.rfind('/');
    out.erase(slash == std::string::npos ? 0 : slash);
  };
  while (!in.empty()) {
    if (in.starts_with("../")) {
      in.remove_prefix(3);
    } else if (in.starts_with("./")) {
      in.remove_prefix(2);
    } else if (in.starts_with("/./")) {
      in.remove_prefix(2);
    } else if (in == "/.") {
      in = "/";
    } else if (in.starts_with("/../")) {
      in.remove_prefix(3);
      drop_last_segment();
    } else if (in == "/..") {
      in = "/";
      drop_last_segment();
    } else if (in == "." || in == "..") {
      in = {};
    } else {
      const std::size_t end = in.find('/', 1);
      const std::size_t n = end == std::string_view::npos ? in.size() : end;
      out.append(in.substr(0, n));
      in.remove_prefix(n);
    }
  }
  return out;
}

std::vector<std::string_view> split_segments(std::string_view path) {
  std::vector<std::string_view> out;
  path.remove_prefix(1);  // the leading '/'
  for (;;) {
    const auto slash = path.find('/');
    out.push_back(path.substr(0, slash));
    if (slash == std::string_view::npos) break;
    path.remove_prefix(slash + 1);
  }
  return out;
}

// '*' any run, '?' one character, within one segment (no '/' in either). `fold_case`:
// letters compared without case (an escape's hex digits are uppercase on both sides either way).
bool segment_matches(std::string_view glob, std::string_view s, bool fold_case) {
  const auto same = [fold_case](char a, char b) {
    return fold_case ? lower_ascii(a) == lower_ascii(b) : a == b;
  };
  std::size_t g = 0, i = 0, star = std::string_view::npos, resume = 0;
  while (i < s.size()) {
    if (g < glob.size() && glob[g] != '*' && (glob[g] == '?' || same(glob[g], s[i]))) {
      ++g;
      ++i;
    } else if (g < glob.size() && glob[g] == '*') {
      star = g++;
      resume = i;
    } else if (star != std::string_view::npos) {
      g = star + 1;
      i = ++resume;
    } else {
      return false;
    }
  }
  while (g < glob.size() && glob[g] == '*') ++g;
  return g == glob.size();
}

}  // namespace

CanonicalPath canonicalize_path(std::string_view target) {
  CanonicalPath out;
  std::string_view raw = target;
  if (const auto q = target.find('?'); q != std::string_view::npos) {
    out.query = target.substr(q + 1);
    out.has_query = true;
    raw = target.substr(0, q);
  }
  if (raw.empty()) {
    out.path = "/";
    return out;
  }
  if (raw == "*") {
    out.path = "*";
    return out;
  }
  if (raw.front() != '/') out.ambiguous = true;
  std::string decoded;
  decoded.reserve(raw.size());
  append_canonical(decoded, raw, false, out.ambiguous);
  if (decoded.find("//") != std::string::npos) out.ambiguous = true;
  out.path = remove_dot_segments(decoded);
  if (out.path.empty() || out.path.front() != '/') out.path.insert(0, 1, '/');
  return out;
}

std::optional<PathGlob> PathGlob::parse(std::string_view text, std::string* error) {
  auto fail = [&](std::string message) -> std::optional<PathGlob> {
    if (error) *error = std::move(message);
    return std::nullopt;
  };
  if (text.empty() || text.front() != '/') return fail("a path glob starts with '/'");
  PathGlob glob;
  const std::vector<std::string_view> raw = split_segments(text);
  for (std::size_t i = 0; i < raw.size(); ++i) {
    const std::string_view segment = raw[i];
    if (segment == "**") {
      glob.segments_.emplace_back("**");
      continue;
    }
    if (segment.find("**") != std::string_view::npos) {
      return fail("\"**\" must be a whole segment, as in \"/repos/**\"");
    }
    std::string canonical;
    bool ambiguous = false;
    append_canonical(canonical, segment, true, ambiguous);
    if (ambiguous) {
      return fail(
          "holds an encoded '/' or '\\', a control character, a ';', a '#' or an invalid "
          "escape, which no canonical path holds");
    }
    if (canonical == "." || canonical == "..") {
      return fail("\".\" and \"..\" segments never match a canonical path");
    }
    if (canonical.empty() && i + 1 != raw.size()) {
      return fail("an empty segment (\"//\") never matches a canonical path");
    }
    glob.segments_.push_back(std::move(canonical));
  }
  for (const std::string& s : glob.segments_) glob.text_ += "/" + s;
  return glob;
}

namespace {

// One pass of parse_repo: lowered, without a ".git" suffix and trailing slashes, parsed.
std::optional<PathGlob> parse_repo_once(std::string_view text, std::string* error) {
  std::string lowered(text);
  std::transform(lowered.begin(), lowered.end(), lowered.begin(), [](unsigned char c) {
    return static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  });
  while (lowered.size() > 1 && lowered.back() == '/') lowered.pop_back();
  // ".git" is a suffix of a name, not a name: "/x/.git" stays (as in recognize_git).
  if (lowered.ends_with(".git") && !lowered.ends_with("/.git")) lowered.resize(lowered.size() - 4);
  if (lowered.ends_with(".git") && !lowered.ends_with("/.git")) {
    if (error) *error = "a repository glob ends in one \".git\" at most";
    return std::nullopt;
  }
  while (lowered.size() > 1 && lowered.back() == '/') lowered.pop_back();
  return PathGlob::parse(lowered, error);
}

}  // namespace

// Twice: the first pass decodes escapes, after its lowering and ".git" step, so "%57" or
// "%2Egit" would be an upper-case letter or a ".git" in its text, and that text would parse to
// another repository the next time. The second pass sees them decoded.
std::optional<PathGlob> PathGlob::parse_repo(std::string_view text, std::string* error) {
  const auto first = parse_repo_once(text, error);
  if (!first) return std::nullopt;
  return parse_repo_once(first->text(), error);
}

bool PathGlob::matches(std::string_view path, PathCase mode) const {
  const bool fold_case = mode == PathCase::insensitive;
  if (path.empty() || path.front() != '/') return false;
  const std::vector<std::string_view> s = split_segments(path);
  const std::size_t g_count = segments_.size();
  const std::size_t s_count = s.size();
  // reach[g][i]: glob segments from g on can match path segments from i on. Filled backwards.
  std::vector<char> reach((g_count + 1) * (s_count + 1), 0);
  const auto at = [&](std::size_t g, std::size_t i) -> char& {
    return reach[g * (s_count + 1) + i];
  };
  at(g_count, s_count) = 1;
  for (std::size_t g = g_count; g-- > 0;) {
    for (std::size_t i = s_count + 1; i-- > 0;) {
      if (segments_[g] == "**") {
        at(g, i) = at(g + 1, i) || (i < s_count && at(g, i + 1));
      } else {
        at(g, i) =
            i < s_count && segment_matches(segments_[g], s[i], fold_case) && at(g + 1, i + 1);
      }
    }
  }
  return at(0, 0) != 0;
}

}  // namespace sandgate::policy
