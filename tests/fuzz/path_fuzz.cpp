// libFuzzer target for the request-rule parsers (policy::canonicalize_path, PathGlob,
// parse_repo_pattern, recognize_git). Besides "no crash, no sanitizer report" it checks that
// a canonical path is a fixed point (canonicalising it again gives it back, unambiguous), that
// it holds no dot-segment and no empty segment, that a parsed glob's canonical text parses to
// the same glob, that a glob without wildcards matches exactly its own text, that what a glob
// matches with case it matches without, and that request_methods puts the method sent first.
#include <cstdint>
#include <cstdlib>
#include <span>
#include <string>
#include <string_view>

#include "policy/path.hpp"
#include "policy/request_rules.hpp"

namespace {

namespace policy = sandgate::policy;

void check(bool ok) {
  if (!ok) std::abort();
}

void check_path(std::string_view input) {
  const policy::CanonicalPath c = policy::canonicalize_path(input);
  const auto q = input.find('?');
  check(c.has_query == (q != std::string_view::npos));
  if (c.has_query) check(c.query == input.substr(q + 1));
  check(!c.path.empty() && (c.path.front() == '/' || c.path == "*"));
  policy::recognize_git("GET", c.path, c.query);
  policy::recognize_git("POST", c.path, c.query);
  policy::recognize_git("PUT", c.path, c.query);
  const std::string_view override_value = input.substr(0, input.find('?'));
  const auto methods = policy::request_methods(
      "post", std::span<const std::string_view>(&override_value, 1), c.query);
  check(!methods.empty() && methods.front() == "POST");
  if (c.ambiguous) return;
  const policy::CanonicalPath again = policy::canonicalize_path(c.path);
  check(!again.ambiguous && again.path == c.path && !again.has_query);
  const std::string_view p = c.path;
  check(p.find("//") == std::string_view::npos);
  check(p.find("/./") == std::string_view::npos && p.find("/../") == std::string_view::npos);
  check(!p.ends_with("/.") && !p.ends_with("/.."));
}

void check_glob(std::string_view input) {
  const auto glob = policy::PathGlob::parse(input);
  if (!glob) return;
  const auto again = policy::PathGlob::parse(glob->text());
  check(again && again->text() == glob->text());
  const std::string path = policy::canonicalize_path(input).path;
  if (glob->matches(path)) check(glob->matches(path, policy::PathCase::insensitive));
  if (glob->text().find_first_of("*?") == std::string::npos) {
    check(glob->matches(glob->text()));
    check(glob->matches(glob->text(), policy::PathCase::insensitive));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  check_path(input);
  check_glob(input);
  if (const auto repo = policy::parse_repo_pattern(input)) {
    check(policy::parse_repo_pattern(repo->to_string()).has_value());
  }
  return 0;
}
