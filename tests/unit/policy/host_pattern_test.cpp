#include "policy/host_pattern.hpp"

#include <gtest/gtest.h>

namespace sandgate::policy {
namespace {

struct PatternRow {
  const char* input;
  bool ok;
  const char* canonical;  // to_string() when ok; a substring of the error otherwise
};

void PrintTo(const PatternRow& row, std::ostream* os) {
  *os << '"' << row.input << '"';
}

class ParsePattern : public testing::TestWithParam<PatternRow> {};

TEST_P(ParsePattern, Parses) {
  const PatternRow& row = GetParam();
  std::string error;
  const auto p = parse_host_pattern(row.input, &error);
  ASSERT_EQ(p.has_value(), row.ok) << row.input << ": " << error;
  if (row.ok) {
    EXPECT_EQ(p->to_string(), row.canonical);
  } else {
    EXPECT_NE(error.find(row.canonical), std::string::npos) << error;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Table, ParsePattern,
    testing::Values(
        PatternRow{"example.com", true, "example.com"},
        PatternRow{"Example.COM.", true, "example.com"},
        PatternRow{"*.example.com", true, "*.example.com"},
        PatternRow{"*.Example.com:8443", true, "*.example.com:8443"},
        PatternRow{"github.com:22", true, "github.com:22"},
        PatternRow{"localhost", true, "localhost"}, PatternRow{"", false, "empty host pattern"},
        PatternRow{"*", false, "'*' is only allowed"}, PatternRow{"*.", false, "invalid host name"},
        PatternRow{"*example.com", false, "'*' is only allowed"},
        PatternRow{"a.*.example.com", false, "'*' is only allowed"},
        PatternRow{"**.example.com", false, "'*' is only allowed"},
        PatternRow{"example.*", false, "'*' is only allowed"},
        PatternRow{"example.com:0", false, "invalid port \"0\""},
        PatternRow{"example.com:65536", false, "invalid port"},
        PatternRow{"example.com:", false, "invalid port"},
        PatternRow{"example.com:http", false, "invalid port"},
        PatternRow{"10.0.0.1", false, "use allow_cidrs"},
        PatternRow{"127.1", false, "use allow_cidrs"},
        PatternRow{"10.0.0.1:80", false, "use allow_cidrs"},
        PatternRow{"[::1]", false, "use allow_cidrs"}, PatternRow{"::1", false, "use allow_cidrs"},
        PatternRow{"*.10.0.0.1", false, "use allow_cidrs"},
        PatternRow{"exa mple.com", false, "invalid host name"},
        PatternRow{"-bad.example", false, "invalid host name"},
        PatternRow{"a..b", false, "invalid host name"},
        PatternRow{"http://example.com", false, "invalid"}));

}  // namespace
}  // namespace sandgate::policy
