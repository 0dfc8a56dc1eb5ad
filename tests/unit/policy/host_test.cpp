#include "policy/host.hpp"

#include <gtest/gtest.h>

namespace sandgate::policy {
namespace {

struct HostRow {
  const char* input;
  Host::Kind kind;
  const char* expected;  // normalised name, address text, or "" for invalid
};

void PrintTo(const HostRow& row, std::ostream* os) {
  *os << '"' << row.input << '"';
}

class NormalizeHost : public testing::TestWithParam<HostRow> {};

TEST_P(NormalizeHost, Normalises) {
  const HostRow& row = GetParam();
  const Host h = normalize_host(row.input);
  ASSERT_EQ(h.kind, row.kind) << row.input;
  switch (row.kind) {
    case Host::Kind::name:
      EXPECT_EQ(h.name, row.expected);
      break;
    case Host::Kind::address:
      EXPECT_EQ(h.address.to_string(), row.expected);
      break;
    case Host::Kind::invalid:
      EXPECT_FALSE(h.invalid_reason.empty());
      break;
  }
}

constexpr auto N = Host::Kind::name;
constexpr auto A = Host::Kind::address;
constexpr auto I = Host::Kind::invalid;

INSTANTIATE_TEST_SUITE_P(
    Table, NormalizeHost,
    testing::Values(
        HostRow{"example.com", N, "example.com"}, HostRow{"EXAMPLE.COM", N, "example.com"},
        HostRow{"Example.Com.", N, "example.com"}, HostRow{"api.github.com", N, "api.github.com"},
        HostRow{"a", N, "a"}, HostRow{"localhost", N, "localhost"},
        HostRow{"xn--bcher-kva.example", N, "xn--bcher-kva.example"},
        HostRow{"_dmarc.example.com", N, "_dmarc.example.com"},
        HostRow{"a-b.example", N, "a-b.example"}, HostRow{"1a.example", N, "1a.example"},
        HostRow{"example.123a", N, "example.123a"}, HostRow{"example.com..", I, ""},
        HostRow{".example.com", I, ""}, HostRow{"example..com", I, ""}, HostRow{"", I, ""},
        HostRow{".", I, ""}, HostRow{"-a.example", I, ""}, HostRow{"a-.example", I, ""},
        HostRow{"exa mple.com", I, ""}, HostRow{"exa\tmple.com", I, ""},
        HostRow{"example.com\r\nX: y", I, ""}, HostRow{"a/b", I, ""}, HostRow{"a@b", I, ""},
        HostRow{"a%2eb", I, ""}, HostRow{"a\\b", I, ""}, HostRow{"*.example.com", I, ""},
        HostRow{"b\xc3\xbc"
                "cher.example",
                I, ""},
        HostRow{"example.com:443", I, ""}, HostRow{"[::1", I, ""}, HostRow{"1.2.3.999", I, ""},
        HostRow{"1.2.3.4.5", I, ""},
        HostRow{"0x1g.0.0.1", I, ""},  // numeric last label: an IPv4 parse that fails
        HostRow{"1.2.3.0x1g", N, "1.2.3.0x1g"}, HostRow{"4294967296", I, ""},
        HostRow{"01.02.03.09", I, ""},
        HostRow{"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.example", I, ""},
        HostRow{"127.0.0.1", A, "127.0.0.1"}, HostRow{"127.1", A, "127.0.0.1"},
        HostRow{"2130706433", A, "127.0.0.1"}, HostRow{"0x7f.1", A, "127.0.0.1"},
        HostRow{"0177.0.0.1", A, "127.0.0.1"}, HostRow{"0x7F000001", A, "127.0.0.1"},
        HostRow{"127.0.0.1.", A, "127.0.0.1"}, HostRow{"[::1]", A, "::1"}, HostRow{"::1", A, "::1"},
        HostRow{"[::ffff:127.0.0.1]", A, "::ffff:127.0.0.1"},
        HostRow{"[::FFFF:7F00:1]", A, "::ffff:127.0.0.1"},
        HostRow{"169.254.169.254", A, "169.254.169.254"},
        HostRow{"0251.0376.0251.0376", A, "169.254.169.254"},
        HostRow{"[fd00:ec2::254]", A, "fd00:ec2::254"}));

TEST(NormalizeHost, LongestValidNameIsAccepted) {
  std::string name;
  while (name.size() < 253) name += (name.empty() ? "" : ".") + std::string(61, 'a');
  name.resize(253);
  if (name.back() == '.') name.back() = 'a';
  EXPECT_TRUE(normalize_host(name).is_name()) << name.size();
  EXPECT_FALSE(normalize_host(name + "a").is_valid());
}

TEST(NormalizeHost, DisplayBracketsIpv6) {
  EXPECT_EQ(normalize_host("::1").display(), "[::1]");
  EXPECT_EQ(normalize_host("127.1").display(), "127.0.0.1");
  EXPECT_EQ(normalize_host("A.B.").display(), "a.b");
}

struct TargetRow {
  const char* input;
  bool ok;
  const char* host;
  int port;  // -1: none
};

void PrintTo(const TargetRow& row, std::ostream* os) {
  *os << '"' << row.input << '"';
}

class ParseTarget : public testing::TestWithParam<TargetRow> {};

TEST_P(ParseTarget, Parses) {
  const TargetRow& row = GetParam();
  const auto t = parse_target(row.input);
  ASSERT_EQ(t.has_value(), row.ok) << row.input;
  if (!row.ok) return;
  EXPECT_EQ(t->host, row.host);
  if (row.port < 0) {
    EXPECT_FALSE(t->port.has_value());
  } else {
    ASSERT_TRUE(t->port.has_value());
    EXPECT_EQ(*t->port, row.port);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Table, ParseTarget,
    testing::Values(
        TargetRow{"example.com", true, "example.com", -1},
        TargetRow{"example.com:8443", true, "example.com", 8443},
        TargetRow{"https://example.com/x?y", true, "example.com", 443},
        TargetRow{"http://example.com", true, "example.com", 80},
        TargetRow{"HTTP://example.com:81/", true, "example.com", 81},
        TargetRow{"[::1]:22", true, "::1", 22}, TargetRow{"[::1]", true, "::1", -1},
        TargetRow{"::1", false, "", 0}, TargetRow{"[allowed.test]:443", false, "", 0},
        TargetRow{"https://[allowed.test]/", false, "", 0},
        TargetRow{"[fe80::1%eth0]", false, "", 0}, TargetRow{"a%2eb", false, "", 0},
        TargetRow{"a.b :443", false, "", 0}, TargetRow{"[1:2]", true, "1:2", -1},
        TargetRow{"a.b/x://y", false, "", 0}, TargetRow{"https://a.b#f", true, "a.b", 443},
        TargetRow{"https://[2001:db8::1]/", true, "2001:db8::1", 443},
        TargetRow{"example.com:0", false, "", 0}, TargetRow{"example.com:65536", false, "", 0},
        TargetRow{"example.com:", false, "", 0}, TargetRow{"", false, "", 0},
        TargetRow{"ftp://example.com", false, "", 0},
        TargetRow{"http://user@example.com/", false, "", 0}, TargetRow{"[::1", false, "", 0},
        TargetRow{"[::1]x", false, "", 0}, TargetRow{"example.com:abc", false, "", 0},
        TargetRow{"example.com:443:", false, "", 0}, TargetRow{"a:b:c", false, "", 0}));

}  // namespace
}  // namespace sandgate::policy
