// canonicalize_path and PathGlob: the path the method, path and git rules match on, and
// the globs they match with. One row per case.
#include "policy/path.hpp"

#include <gtest/gtest.h>

namespace sandgate::policy {
namespace {

struct CanonRow {
  const char* name;
  std::string_view target;
  const char* path;
  const char* query;  // null: no '?'
  bool ambiguous;
};

void PrintTo(const CanonRow& row, std::ostream* os) {
  *os << row.name;
}

class Canonicalize : public testing::TestWithParam<CanonRow> {};

TEST_P(Canonicalize, OneCanonicalPathPerTarget) {
  const CanonRow& row = GetParam();
  const CanonicalPath c = canonicalize_path(row.target);
  EXPECT_EQ(c.ambiguous, row.ambiguous);
  if (!row.ambiguous) {
    EXPECT_EQ(c.path, row.path);
  }
  EXPECT_EQ(c.has_query, row.query != nullptr);
  if (row.query) {
    EXPECT_EQ(c.query, row.query);
  }
}

using namespace std::string_view_literals;

INSTANTIATE_TEST_SUITE_P(
    Rows, Canonicalize,
    testing::Values(
        CanonRow{"root", "/", "/", nullptr, false},
        CanonRow{"empty_is_root", "", "/", nullptr, false},
        CanonRow{"asterisk_form", "*", "*", nullptr, false},
        CanonRow{"plain", "/repos/acme/widget", "/repos/acme/widget", nullptr, false},
        CanonRow{"trailing_slash_kept", "/repos/acme/", "/repos/acme/", nullptr, false},
        CanonRow{"query_split_off", "/a/b?x=1&y=/../c", "/a/b", "x=1&y=/../c", false},
        CanonRow{"empty_query", "/a?", "/a", "", false},
        CanonRow{"query_only", "?q", "/", "q", false},
        CanonRow{"query_may_hold_anything", "/a?%2F%00\\;#", "/a", "%2F%00\\;#", false},
        // Unreserved escapes are decoded, in either case of hex.
        CanonRow{"unreserved_letters_decoded", "/%61%62%43", "/abC", nullptr, false},
        CanonRow{"unreserved_digits_decoded", "/v%31", "/v1", nullptr, false},
        CanonRow{"unreserved_marks_decoded", "/%2d%2E%5f%7E", "/-._~", nullptr, false},
        CanonRow{"lowercase_hex_unreserved", "/%7euser", "/~user", nullptr, false},
        // Other escapes stay, with uppercase hex.
        CanonRow{"reserved_escape_kept", "/a%3ab", "/a%3Ab", nullptr, false},
        CanonRow{"space_escape_kept", "/a%20b", "/a%20b", nullptr, false},
        CanonRow{"percent_escape_kept", "/100%25", "/100%25", nullptr, false},
        CanonRow{"utf8_escape_uppercased", "/caf%c3%a9", "/caf%C3%A9", nullptr, false},
        CanonRow{"raw_utf8_encoded", "/caf\xc3\xa9", "/caf%C3%A9", nullptr, false},
        CanonRow{"raw_space_encoded", "/a b", "/a%20b", nullptr, false},
        CanonRow{"raw_sub_delims_kept", "/a!$&'()*+,=:@b", "/a!$&'()*+,=:@b", nullptr, false},
        CanonRow{"raw_quote_encoded", "/a\"b", "/a%22b", nullptr, false},
        // Dot-segments (RFC 3986 5.2.4).
        CanonRow{"dot", "/a/./b", "/a/b", nullptr, false},
        CanonRow{"dot_dot", "/a/b/../c", "/a/c", nullptr, false},
        CanonRow{"dot_dot_at_end", "/a/b/..", "/a/", nullptr, false},
        CanonRow{"dot_at_end", "/a/b/.", "/a/b/", nullptr, false},
        CanonRow{"dot_dot_above_root", "/../../a", "/a", nullptr, false},
        CanonRow{"only_dot_dot", "/..", "/", nullptr, false},
        CanonRow{"encoded_dot_dot", "/public/%2E%2E/admin", "/admin", nullptr, false},
        CanonRow{"encoded_dot_dot_lowercase", "/public/%2e%2e/admin", "/admin", nullptr, false},
        CanonRow{"half_encoded_dot_dot", "/public/.%2e/admin", "/admin", nullptr, false},
        CanonRow{"encoded_dot", "/a/%2E/b", "/a/b", nullptr, false},
        CanonRow{"dots_in_a_name_kept", "/a/..b/c.", "/a/..b/c.", nullptr, false},
        CanonRow{"three_dots_kept", "/a/.../b", "/a/.../b", nullptr, false},
        CanonRow{"dot_dot_then_query", "/a/b/..?x", "/a/", "x", false},
        // Ambiguous: servers disagree on these, so rules never match them.
        CanonRow{"encoded_slash", "/repos/acme%2Fother", "", nullptr, true},
        CanonRow{"encoded_slash_lowercase", "/a%2fb", "", nullptr, true},
        CanonRow{"encoded_backslash", "/a%5Cb", "", nullptr, true},
        CanonRow{"raw_backslash", "/a\\..\\b", "", nullptr, true},
        CanonRow{"encoded_nul", "/a%00b", "", nullptr, true},
        CanonRow{"encoded_newline", "/a%0A", "", nullptr, true},
        CanonRow{"encoded_del", "/a%7F", "", nullptr, true},
        CanonRow{"raw_control", "/a\x01", "", nullptr, true},
        CanonRow{"raw_nul", "/a\0b"sv, "", nullptr, true},
        CanonRow{"raw_tab", "/a\tb", "", nullptr, true},
        CanonRow{"invalid_escape", "/a%zz", "", nullptr, true},
        CanonRow{"truncated_escape", "/a%4", "", nullptr, true},
        CanonRow{"lone_percent", "/a%", "", nullptr, true},
        CanonRow{"double_encoded_slash", "/a%252Fb", "", nullptr, true},
        CanonRow{"double_encoded_dot", "/a/%252E%252E/b", "", nullptr, true},
        CanonRow{"double_encoded_with_encoded_digits", "/a/%25%32F", "", nullptr, true},
        CanonRow{"percent_then_one_hex_digit", "/100%25x", "/100%25x", nullptr, false},
        CanonRow{"percent_at_the_end", "/a%25", "/a%25", nullptr, false},
        CanonRow{"raw_semicolon", "/admin;x/secret", "", nullptr, true},
        CanonRow{"encoded_semicolon", "/admin%3Bx/secret", "", nullptr, true},
        CanonRow{"empty_segment", "//admin", "", nullptr, true},
        CanonRow{"empty_segment_inside", "/repos/acme//../other", "", nullptr, true},
        CanonRow{"trailing_double_slash", "/a//", "", nullptr, true},
        CanonRow{"fragment", "/a#b", "", nullptr, true},
        CanonRow{"not_origin_form", "a/b", "", nullptr, true},
        CanonRow{"absolute_form", "http://x/a", "", nullptr, true}));

struct GlobRow {
  const char* glob;
  const char* path;
  bool matches;
};

TEST(PathGlob, MatchesCanonicalPaths) {
  const GlobRow rows[] = {
      {"/", "/", true},
      {"/", "/a", false},
      {"/a", "/a", true},
      {"/a", "/a/", false},
      {"/a", "/A", false},  // case-sensitive
      {"/a/", "/a/", true},
      {"/a/*", "/a/b", true},
      {"/a/*", "/a/", true},  // '*' may match nothing
      {"/a/*", "/a/b/c", false},
      {"/a/*", "/a", false},
      {"/a/b*", "/a/bcd", true},
      {"/a/*d", "/a/bcd", true},
      {"/a/*c*", "/a/abcde", true},
      {"/a/*x*", "/a/abcde", false},
      {"/a/?", "/a/b", true},
      {"/a/?", "/a/bc", false},
      {"/a/?", "/a/", false},
      {"/a/b?d", "/a/bcd", true},
      {"/**", "/", true},
      {"/**", "/a/b/c", true},
      {"/a/**", "/a", true},
      {"/a/**", "/a/", true},
      {"/a/**", "/a/b/c", true},
      {"/a/**", "/ab", false},
      {"/a/**", "/b/a", false},
      {"/a/**/z", "/a/z", true},
      {"/a/**/z", "/a/b/c/z", true},
      {"/a/**/z", "/a/b/c/zz", false},
      {"/a/**/z/**", "/a/b/z/c/z", true},
      {"/**/*.json", "/x/y/pkg.json", true},
      {"/**/*.json", "/pkg.json", true},
      {"/**/*.json", "/pkg.jsonx", false},
      {"/repos/acme/*/pulls", "/repos/acme/widget/pulls", true},
      {"/repos/acme/*/pulls", "/repos/acme/widget/issues", false},
      {"/~user", "/~user", true},
      {"/%7euser", "/~user", true},  // the glob is canonicalised too
      {"/a%3ab", "/a%3Ab", true},
      {"/a*", "*", false},  // asterisk form matches no glob
      {"/**", "*", false},
      {"/a/*b", "/a/*xb", true},  // a '*' in the path does not use up the glob's star
      {"/a/*b", "/a/*", false},
  };
  for (const GlobRow& row : rows) {
    std::string error;
    const auto glob = PathGlob::parse(row.glob, &error);
    ASSERT_TRUE(glob) << row.glob << ": " << error;
    EXPECT_EQ(glob->matches(row.path), row.matches) << row.glob << " vs " << row.path;
  }
}

struct CaseRow {
  const char* glob;
  const char* path;
  bool sensitive;    // matches under PathCase::sensitive
  bool insensitive;  // matches under PathCase::insensitive
};

// THREATS 32: an origin that resolves paths without case (GitHub's owners and repositories)
// serves /repos/ACME/prod what a rule says of /repos/acme/prod.
TEST(PathGlob, MatchesWithoutCaseWhenAsked) {
  const CaseRow rows[] = {
      {"/repos/acme/prod/**", "/repos/acme/prod/x", true, true},
      {"/repos/acme/prod/**", "/repos/ACME/prod/x", false, true},
      {"/repos/acme/prod/**", "/REPOS/Acme/PROD", false, true},
      {"/Repos/*/Issues", "/repos/widget/issues", false, true},  // the glob's case too
      {"/a/W?dget*", "/a/widgetS", false, true},
      {"/a/%C3%A9", "/a/%C3%89", false, false},  // bytes beyond ASCII keep their case
      {"/repos/acme/prod/**", "/repos/acme/production", false, false},
      {"/**/*.JSON", "/x/pkg.json", false, true},
  };
  for (const CaseRow& row : rows) {
    const auto glob = PathGlob::parse(row.glob);
    ASSERT_TRUE(glob) << row.glob;
    EXPECT_EQ(glob->matches(row.path, PathCase::sensitive), row.sensitive)
        << row.glob << " vs " << row.path;
    EXPECT_EQ(glob->matches(row.path, PathCase::insensitive), row.insensitive)
        << row.glob << " vs " << row.path;
  }
}

TEST(PathGlob, RefusesWhatCouldNeverMatch) {
  const char* bad[] = {"",       "a/b",     "*",     "/a**",   "/***",    "/a/**b",
                       "/a/./b", "/a/../b", "/a//b", "/a%2Fb", "/a%00",   "/a;b",
                       "/a\\b",  "/a%zz",   "/.",    "/a/..",  "/a%252F", "/a#b"};
  for (const char* text : bad) {
    std::string error;
    EXPECT_FALSE(PathGlob::parse(text, &error)) << text;
    EXPECT_FALSE(error.empty()) << text;
  }
}

TEST(PathGlob, RepositoryGlobsAreLowercaseWithoutDotGit) {
  const auto glob = PathGlob::parse_repo("/Acme/Widget.git/");
  ASSERT_TRUE(glob);
  EXPECT_EQ(glob->text(), "/acme/widget");
  EXPECT_TRUE(glob->matches("/acme/widget"));
  const auto wild = PathGlob::parse_repo("/acme/*");
  ASSERT_TRUE(wild);
  EXPECT_EQ(wild->text(), "/acme/*");
}

TEST(PathGlob, ManyStarsStayCheap) {
  // Backtracking on '*' is linear per attempt and '**' is a table: this ends at once.
  const auto glob = PathGlob::parse("/**/*a*a*a*a*a*a*a*a*b/**/**/**/x");
  ASSERT_TRUE(glob);
  std::string path;
  for (int i = 0; i < 40; ++i) path += "/" + std::string(60, 'a');
  EXPECT_FALSE(glob->matches(path));
}

}  // namespace
}  // namespace sandgate::policy
