#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sandgate::policy {

// A request target's path as the method, path and git rules see it (docs/policy.md, "Path
// canonicalisation"): percent-escapes of unreserved characters (ALPHA DIGIT - . _ ~) decoded,
// other escapes kept with uppercase hex, characters outside RFC 3986's pchar set
// percent-encoded, dot-segments removed (RFC 3986 5.2.4, after decoding, so %2E%2E is one),
// the query split off. `ambiguous` is set when the path holds something servers read in
// different ways: an encoded '/' or '\' (%2F, %5C), an encoded or raw control character
// (%00, %0A, ...), a raw '\', an invalid '%' escape, an encoded '%' starting an escape
// (%252F, decoded twice by some servers), a ';' raw or encoded (path parameters, which some
// servers strip), an empty segment ("//", which some servers merge), or a '#'. Rules never
// match such a path (Reason::ambiguous_path); `path` is then best effort, for logs.
struct CanonicalPath {
  std::string path;        // starts with '/', or is "*" for an asterisk-form target
  std::string_view query;  // after the first '?', a view into the target; without the '?'
  bool has_query = false;
  bool ambiguous = false;
};

// `target` is the request target in origin form ("/a/b?q") or asterisk form ("*"); an empty
// one is "/". Anything else (an absolute form) is read as a path and is ambiguous unless it
// starts with '/'.
CanonicalPath canonicalize_path(std::string_view target);

// How a glob compares letters: byte for byte, or ASCII letters without case (for origins that
// resolve paths without case, as GitHub does owners and repositories: docs/policy.md).
enum class PathCase { sensitive, insensitive };

// A path glob over canonical paths: '*' matches any run of characters other than '/', '?'
// exactly one such character, and a whole segment "**" any number of segments (none
// included), so "/repos/acme/**" matches "/repos/acme", "/repos/acme/" and
// "/repos/acme/x/y". Everything else matches itself, byte for byte, or without the case of
// ASCII letters under PathCase::insensitive. Parsed into segments once; matching costs at most
// (glob segments x path segments) segment matches.
class PathGlob {
 public:
  // Parses a glob. It must start with '/', and is canonicalised like a path (so "/%7euser"
  // is "/~user"); "**" only as a whole segment; no "." or ".." segment, no empty segment,
  // nothing a canonical path never holds (an ambiguous escape, a ';', a '\'). nullopt and a
  // reason in *error otherwise.
  static std::optional<PathGlob> parse(std::string_view text, std::string* error = nullptr);
  // Same, for a repository path glob: compared in lowercase, without a trailing ".git".
  static std::optional<PathGlob> parse_repo(std::string_view text, std::string* error = nullptr);

  bool matches(std::string_view canonical_path, PathCase mode = PathCase::sensitive) const;
  const std::string& text() const { return text_; }  // canonical text
  bool operator==(const PathGlob& other) const { return text_ == other.text_; }

 private:
  std::string text_;
  std::vector<std::string> segments_;  // after the leading '/'
};

}  // namespace sandgate::policy
