#include "policy/ip_address.hpp"

#include <gtest/gtest.h>

#include <cctype>
#include <optional>
#include <string>
#include <string_view>

namespace sandgate::policy {
namespace {

using namespace std::string_literals;

// GoogleTest parameter names allow only [A-Za-z0-9_]; rows carry free-text names.
std::string param_name(std::string_view text) {
  std::string out;
  for (const char c : text) {
    out += std::isalnum(static_cast<unsigned char>(c)) != 0 ? c : '_';
  }
  return out;
}

template <class Row>
std::string row_name(const testing::TestParamInfo<Row>& info) {
  return param_name(info.param.name);
}

// ---------------------------------------------------------------------------------------------
// parse_ip_literal

struct ParseRow {
  const char* name;
  std::string input;
  const char* expected;  // canonical to_string(), or nullptr when the input must be rejected
};

std::ostream& operator<<(std::ostream& os, const ParseRow& r) {
  return os << '"' << r.input << '"';
}

class ParseIpLiteral : public testing::TestWithParam<ParseRow> {};

TEST_P(ParseIpLiteral, ParsesToCanonicalText) {
  const ParseRow& row = GetParam();
  const std::optional<IpAddress> parsed = parse_ip_literal(row.input);
  if (row.expected == nullptr) {
    EXPECT_FALSE(parsed.has_value()) << "parsed as " << parsed->to_string();
    return;
  }
  ASSERT_TRUE(parsed.has_value());
  EXPECT_EQ(parsed->to_string(), row.expected);
  const bool expect_v6 = std::string_view(row.expected).find(':') != std::string_view::npos;
  EXPECT_EQ(parsed->is_v4(), !expect_v6);
}

const ParseRow kIpv4Spellings[] = {
    {"dotted quad", "127.0.0.1", "127.0.0.1"},
    {"two parts", "127.1", "127.0.0.1"},
    {"three parts", "127.0.1", "127.0.0.1"},
    {"single decimal", "2130706433", "127.0.0.1"},
    {"hex first part", "0x7f.1", "127.0.0.1"},
    {"octal first part", "0177.0.0.1", "127.0.0.1"},
    {"single hex", "0x7f000001", "127.0.0.1"},
    {"single hex uppercase", "0X7F000001", "127.0.0.1"},
    {"single octal", "017700000001", "127.0.0.1"},
    {"trailing dot", "127.0.0.1.", "127.0.0.1"},
    {"two parts trailing dot", "127.1.", "127.0.0.1"},
    {"three parts trailing dot", "127.0.0.", "127.0.0.0"},
    {"hex every part", "0x7F.0x0.0x0.0x1", "127.0.0.1"},
    {"hex first dotted", "0x7f.0.0.1", "127.0.0.1"},
    {"octal last part", "0177.0.0.01", "127.0.0.1"},
    {"octal many zeros", "00000177.0.0.1", "127.0.0.1"},
    {"hex leading zeros", "0x00007f.0.0.1", "127.0.0.1"},
    {"hex last of two", "127.0x1", "127.0.0.1"},
    {"hex last of four", "127.0.0.0x1", "127.0.0.1"},
    {"octal zero part", "127.00.0.1", "127.0.0.1"},
    {"bare 0x parts are zero", "0x7f.0x.0x.1", "127.0.0.1"},
    {"bare 0x", "0x", "0.0.0.0"},
    {"bare 0X", "0X", "0.0.0.0"},
    {"all bare 0x", "0x.0x.0x.0x", "0.0.0.0"},
    {"zero quad", "0.0.0.0", "0.0.0.0"},
    {"zero", "0", "0.0.0.0"},
    {"zero hex", "0x0", "0.0.0.0"},
    {"zero octal", "00", "0.0.0.0"},
    {"zero trailing dot", "0.", "0.0.0.0"},
    {"broadcast quad", "255.255.255.255", "255.255.255.255"},
    {"broadcast decimal", "4294967295", "255.255.255.255"},
    {"broadcast hex", "0xffffffff", "255.255.255.255"},
    {"broadcast octal", "037777777777", "255.255.255.255"},
    {"broadcast two parts", "255.16777215", "255.255.255.255"},
    {"broadcast three parts", "255.255.65535", "255.255.255.255"},
    {"public quad", "8.8.8.8", "8.8.8.8"},
    {"public ones", "1.2.3.4", "1.2.3.4"},
    {"public hex last of four", "1.2.3.0x4", "1.2.3.4"},
    {"public hex last of three", "1.2.0x304", "1.2.3.4"},
    {"public hex last of two", "1.0x20304", "1.2.3.4"},
    {"public single hex padded", "0x01020304", "1.2.3.4"},
    {"public single decimal", "16909060", "1.2.3.4"},
    {"metadata quad", "169.254.169.254", "169.254.169.254"},
    {"metadata hex", "0xa9fea9fe", "169.254.169.254"},
    {"metadata decimal", "2852039166", "169.254.169.254"},
    {"metadata octal parts", "0251.0376.0251.0376", "169.254.169.254"},
    {"metadata three parts", "169.254.43518", "169.254.169.254"},
    {"metadata two parts", "169.16689662", "169.254.169.254"},
    {"private quad", "10.0.0.1", "10.0.0.1"},
    {"private two parts", "10.1", "10.0.0.1"},
    {"private hex parts", "0xc0.0xa8.1.1", "192.168.1.1"},
    {"private decimal", "3232235521", "192.168.0.1"},
    {"private octal first", "012.0.0.1", "10.0.0.1"},
    {"max octet each part", "255.255.255.0xff", "255.255.255.255"},
    {"leading zero decimal looking octal", "010.010.010.010", "8.8.8.8"},
};
INSTANTIATE_TEST_SUITE_P(Ipv4Spellings, ParseIpLiteral, testing::ValuesIn(kIpv4Spellings),
                         row_name<ParseRow>);

const ParseRow kIpv4Rejects[] = {
    {"empty", "", nullptr},
    {"lone dot", ".", nullptr},
    {"two dots", "..", nullptr},
    {"two trailing dots", "127.0.0.1..", nullptr},
    {"leading dot", ".127.0.0.1", nullptr},
    {"empty middle part", "127..0.1", nullptr},
    {"five parts", "1.2.3.4.5", nullptr},
    {"five parts trailing dot", "1.2.3.4.5.", nullptr},
    {"first octet 256", "256.0.0.1", nullptr},
    {"second octet 256", "1.256.0.1", nullptr},
    {"third octet 256", "1.2.256.1", nullptr},
    {"fourth octet 256", "1.2.3.256", nullptr},
    {"decimal 2 pow 32", "4294967296", nullptr},
    {"hex 2 pow 32", "0x100000000", nullptr},
    {"octal 2 pow 32", "040000000000", nullptr},
    {"huge decimal", "99999999999999999999999", nullptr},
    {"huge hex", "0xffffffffffffffffffffffff", nullptr},
    {"huge wraps to 127.0.0.1 mod 2 pow 64", "18446744075840258049", nullptr},
    {"two parts last too big", "1.16777216", nullptr},
    {"three parts last too big", "1.2.65536", nullptr},
    {"two parts first too big", "256.1", nullptr},
    {"hex first too big", "0x100.1", nullptr},
    {"octal first too big", "0400.0.0.1", nullptr},
    {"invalid octal digit 8", "08.0.0.1", nullptr},
    {"invalid octal digit 9", "09", nullptr},
    {"invalid hex digit", "0x7g.1", nullptr},
    {"double 0x", "0x0x1", nullptr},
    {"letter last part", "1.2.3.a", nullptr},
    {"all letters", "a.b.c.d", nullptr},
    {"negative part", "1.2.3.-4", nullptr},
    {"plus sign", "+1.2.3.4", nullptr},
    {"trailing space", "1.2.3.4 ", nullptr},
    {"leading space", " 1.2.3.4", nullptr},
    {"trailing newline", "1.2.3.4\n", nullptr},
    {"embedded nul", "1.2.3.4\0"s, nullptr},
    {"nul inside", "127\0.0.0.1"s, nullptr},
    {"commas", "1,2,3,4", nullptr},
    {"with prefix length", "1.2.3.4/32", nullptr},
    {"with port", "1.2.3.4:80", nullptr},
    {"exponent", "1e3", nullptr},
    {"name", "example.com", nullptr},
    {"localhost", "localhost", nullptr},
    {"name over ip", "127.0.0.1.nip.io", nullptr},
    {"ip suffix name", "www.1.2.3.4", nullptr},
    {"bare 0x then junk", "0xx1", nullptr},
    {"fullwidth digit", "127.0.0.\xef\xbc\x91", nullptr},
    {"underscore", "127_0_0_1", nullptr},
};
INSTANTIATE_TEST_SUITE_P(Ipv4Rejects, ParseIpLiteral, testing::ValuesIn(kIpv4Rejects),
                         row_name<ParseRow>);

const ParseRow kIpv6Spellings[] = {
    {"loopback", "::1", "::1"},
    {"loopback bracketed", "[::1]", "::1"},
    {"loopback expanded", "0:0:0:0:0:0:0:1", "::1"},
    {"loopback zero padded", "0000:0000:0000:0000:0000:0000:0000:0001", "::1"},
    {"unspecified", "::", "::"},
    {"unspecified bracketed", "[::]", "::"},
    {"unspecified expanded", "0:0:0:0:0:0:0:0", "::"},
    {"mapped dotted", "::ffff:127.0.0.1", "::ffff:127.0.0.1"},
    {"mapped dotted bracketed", "[::ffff:127.0.0.1]", "::ffff:127.0.0.1"},
    {"mapped hex", "::ffff:7f00:1", "::ffff:127.0.0.1"},
    {"mapped hex bracketed", "[::ffff:7f00:1]", "::ffff:127.0.0.1"},
    {"mapped hex uppercase", "::FFFF:7F00:1", "::ffff:127.0.0.1"},
    {"mapped expanded", "0:0:0:0:0:ffff:7f00:1", "::ffff:127.0.0.1"},
    {"mapped metadata", "::ffff:a9fe:a9fe", "::ffff:169.254.169.254"},
    {"compatible dotted", "::127.0.0.1", "::7f00:1"},
    {"compatible hex", "::7f00:1", "::7f00:1"},
    {"translated siit", "::ffff:0:7f00:1", "::ffff:0:7f00:1"},
    {"translated siit dotted", "::ffff:0:127.0.0.1", "::ffff:0:7f00:1"},
    {"nat64 hex", "64:ff9b::7f00:1", "64:ff9b::7f00:1"},
    {"nat64 dotted", "64:ff9b::127.0.0.1", "64:ff9b::7f00:1"},
    {"nat64 local use", "64:ff9b:1::a9fe:a9fe", "64:ff9b:1::a9fe:a9fe"},
    {"6to4 padded", "2002:7f00:0001::", "2002:7f00:1::"},
    {"6to4", "2002:7f00:1::", "2002:7f00:1::"},
    {"teredo loopback", "2001:0:4136:e378:8000:63bf:80ff:fffe",
     "2001:0:4136:e378:8000:63bf:80ff:fffe"},
    {"teredo metadata", "2001:0000:4136:e378:8000:63bf:5601:5601",
     "2001:0:4136:e378:8000:63bf:5601:5601"},
    {"link local", "fe80::1", "fe80::1"},
    {"link local uppercase", "FE80::1", "fe80::1"},
    {"documentation uppercase", "2001:DB8::1", "2001:db8::1"},
    {"documentation expanded", "2001:0db8:0000:0000:0000:0000:0000:0001", "2001:db8::1"},
    {"ec2 metadata", "fd00:ec2::254", "fd00:ec2::254"},
    {"ec2 metadata bracketed uppercase", "[FD00:EC2::254]", "fd00:ec2::254"},
    {"multicast", "ff02::1", "ff02::1"},
    {"public", "2606:4700:4700::1111", "2606:4700:4700::1111"},
    {"rfc5952 longest run wins", "1:0:0:2:0:0:0:3", "1:0:0:2::3"},
    {"rfc5952 first run on tie", "1:0:0:2:0:0:3:4", "1::2:0:0:3:4"},
    {"rfc5952 single zero not compressed", "2001:db8:0:1:1:1:1:1", "2001:db8:0:1:1:1:1:1"},
    {"rfc5952 trailing single zero", "1:2:3:4:5:6:7::", "1:2:3:4:5:6:7:0"},
    {"rfc5952 leading single zero", "::2:3:4:5:6:7:8", "0:2:3:4:5:6:7:8"},
    {"rfc5952 trailing run", "1::", "1::"},
    {"rfc5952 leading zeros dropped", "2001:0db8:00aa:0bbb:cccc:000d:e:000f",
     "2001:db8:aa:bbb:cccc:d:e:f"},
    {"rfc5952 full", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
     "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"},
};
INSTANTIATE_TEST_SUITE_P(Ipv6Spellings, ParseIpLiteral, testing::ValuesIn(kIpv6Spellings),
                         row_name<ParseRow>);

const ParseRow kIpv6Rejects[] = {
    {"zone id", "fe80::1%eth0", nullptr},
    {"zone id numeric", "fe80::1%1", nullptr},
    {"zone id bracketed", "[fe80::1%eth0]", nullptr},
    {"zone id url encoded", "[fe80::1%25eth0]", nullptr},
    {"open bracket only", "[::1", nullptr},
    {"close bracket only", "::1]", nullptr},
    {"empty brackets", "[]", nullptr},
    {"lone open bracket", "[", nullptr},
    {"double brackets", "[[::1]]", nullptr},
    {"bracketed ipv4", "[127.0.0.1]", nullptr},
    {"bracketed with port", "[::1]:443", nullptr},
    {"space in brackets", "[ ::1]", nullptr},
    {"trailing space", "::1 ", nullptr},
    {"three colons", ":::", nullptr},
    {"two double colons", "1::2::3", nullptr},
    {"nine groups", "1:2:3:4:5:6:7:8:9", nullptr},
    {"eight groups and double colon", "1:2:3:4:5:6:7:8::", nullptr},
    {"five hex digits", "12345::", nullptr},
    {"bad hex digit", "g::1", nullptr},
    {"single colon", ":", nullptr},
    {"leading single colon", ":1::2", nullptr},
    {"mapped short v4", "::ffff:127.1", nullptr},
    {"mapped octal v4", "::ffff:0177.0.0.1", nullptr},
    {"mapped v4 out of range", "::ffff:256.0.0.1", nullptr},
    {"mapped v4 trailing dot", "::ffff:1.2.3.4.", nullptr},
    {"embedded nul", "::1\0"s, nullptr},
    {"embedded nul then junk", "::1\0zz"s, nullptr},
    {"too long", "0000:0000:0000:0000:0000:0000:0000:0000:0000:0000:0000:0000:0001", nullptr},
    {"with prefix length", "::1/128", nullptr},
};
INSTANTIATE_TEST_SUITE_P(Ipv6Rejects, ParseIpLiteral, testing::ValuesIn(kIpv6Rejects),
                         row_name<ParseRow>);

// ---------------------------------------------------------------------------------------------
// looks_like_ipv4

struct LooksRow {
  const char* name;
  const char* input;
  bool expected;
};

std::ostream& operator<<(std::ostream& os, const LooksRow& r) {
  return os << '"' << r.input << '"';
}

class LooksLikeIpv4 : public testing::TestWithParam<LooksRow> {};

TEST_P(LooksLikeIpv4, MatchesBrowserRule) {
  EXPECT_EQ(looks_like_ipv4(GetParam().input), GetParam().expected);
}

const LooksRow kLooksRows[] = {
    {"dotted quad", "127.0.0.1", true},
    {"out of range octet", "1.2.3.999", true},
    {"five parts", "1.2.3.4.5", true},
    {"single number", "999", true},
    {"huge number", "4294967296", true},
    {"hex", "0x7f", true},
    {"hex uppercase", "0X7F", true},
    {"bare 0x", "0x", true},
    {"name ending in number", "example.123", true},
    {"name ending in hex", "foo.0x1", true},
    {"name ending in bare 0x", "foo.0x", true},
    {"trailing dot", "127.0.0.1.", true},
    {"invalid octal is still digits", "08", true},
    {"digits last label", "1.2.3.09", true},
    {"all 256", "256.256.256.256", true},
    {"empty", "", false},
    {"lone dot", ".", false},
    {"two trailing dots", "1.2.3.4..", false},
    {"name", "example.com", false},
    {"letter last label", "1.2.3.a", false},
    {"bad hex", "foo.0xg", false},
    {"hex then junk", "0x1g", false},
    {"ipv6", "::1", false},
    {"ipv6 bracketed", "[::1]", false},
    {"digits then letter", "1.2.3.4a", false},
    {"letter then digit", "a1", false},
    {"localhost", "localhost", false},
    {"exponent", "1e5", false},
    {"negative", "-1", false},
    {"number first label only", "123.example", false},
};
INSTANTIATE_TEST_SUITE_P(Rows, LooksLikeIpv4, testing::ValuesIn(kLooksRows), row_name<LooksRow>);

// ---------------------------------------------------------------------------------------------
// IpAddress value type

TEST(IpAddressValue, V4StoresNetworkOrder) {
  const IpAddress a = IpAddress::v4(0x7f000001);
  EXPECT_TRUE(a.is_v4());
  EXPECT_EQ(a.size(), 4U);
  EXPECT_EQ(a.bytes[0], 127);
  EXPECT_EQ(a.bytes[3], 1);
  EXPECT_EQ(a.v4_value(), 0x7f000001U);
  EXPECT_EQ(a.to_string(), "127.0.0.1");
}

TEST(IpAddressValue, V6KeepsBytes) {
  std::array<std::uint8_t, 16> b{};
  b[15] = 1;
  const IpAddress a = IpAddress::v6(b);
  EXPECT_FALSE(a.is_v4());
  EXPECT_EQ(a.size(), 16U);
  EXPECT_EQ(a.to_string(), "::1");
  EXPECT_EQ(a, *parse_ip_literal("::1"));
}

TEST(IpAddressValue, FamiliesNeverCompareEqual) {
  // 0.0.0.0 and :: have the same (all-zero) bytes but are different addresses.
  EXPECT_NE(*parse_ip_literal("0.0.0.0"), *parse_ip_literal("::"));
}

TEST(IpAddressValue, SpellingsOfOneAddressAreEqual) {
  const IpAddress expected = IpAddress::v4(0x7f000001);
  for (const char* spelling :
       {"127.0.0.1", "127.1", "2130706433", "0x7f.1", "0177.0.0.1", "0x7f000001", "127.0.0.1."}) {
    SCOPED_TRACE(spelling);
    EXPECT_EQ(parse_ip_literal(spelling), expected);
  }
}

// ---------------------------------------------------------------------------------------------
// parse_cidr

struct CidrRow {
  const char* name;
  const char* input;
  const char* expected;  // canonical Cidr::to_string(), or nullptr on error
  const char* error;     // substring of the error message when expected is nullptr
};

std::ostream& operator<<(std::ostream& os, const CidrRow& r) {
  return os << '"' << r.input << '"';
}

class ParseCidr : public testing::TestWithParam<CidrRow> {};

TEST_P(ParseCidr, ParsesOrExplains) {
  const CidrRow& row = GetParam();
  std::string error;
  const std::optional<Cidr> cidr = parse_cidr(row.input, &error);
  if (row.expected == nullptr) {
    ASSERT_FALSE(cidr.has_value()) << "parsed as " << cidr->to_string();
    EXPECT_NE(error.find(row.error), std::string::npos) << "error: " << error;
    return;
  }
  ASSERT_TRUE(cidr.has_value()) << error;
  EXPECT_EQ(cidr->to_string(), row.expected);
  // The canonical text parses back to the same range.
  EXPECT_EQ(parse_cidr(cidr->to_string()), cidr);
}

const CidrRow kCidrRows[] = {
    {"v4 rfc1918 10", "10.0.0.0/8", "10.0.0.0/8", nullptr},
    {"v4 rfc1918 172", "172.16.0.0/12", "172.16.0.0/12", nullptr},
    {"v4 rfc1918 192", "192.168.0.0/16", "192.168.0.0/16", nullptr},
    {"v4 everything", "0.0.0.0/0", "0.0.0.0/0", nullptr},
    {"v4 host", "1.2.3.4/32", "1.2.3.4/32", nullptr},
    {"v4 bare address is host", "1.2.3.4", "1.2.3.4/32", nullptr},
    {"v4 metadata host", "169.254.169.254/32", "169.254.169.254/32", nullptr},
    {"v4 cgnat", "100.64.0.0/10", "100.64.0.0/10", nullptr},
    {"v4 broadcast", "255.255.255.255/32", "255.255.255.255/32", nullptr},
    {"v4 top half", "128.0.0.0/1", "128.0.0.0/1", nullptr},
    {"v4 slash 31", "10.0.0.2/31", "10.0.0.2/31", nullptr},
    {"v4 slash 23", "192.168.0.0/23", "192.168.0.0/23", nullptr},
    {"v4 zero address slash 32", "0.0.0.0/32", "0.0.0.0/32", nullptr},
    {"v6 everything", "::/0", "::/0", nullptr},
    {"v6 loopback", "::1/128", "::1/128", nullptr},
    {"v6 bare address is host", "::1", "::1/128", nullptr},
    {"v6 ula slash 8", "fd00::/8", "fd00::/8", nullptr},
    {"v6 ula slash 7", "fc00::/7", "fc00::/7", nullptr},
    {"v6 documentation", "2001:db8::/32", "2001:db8::/32", nullptr},
    {"v6 documentation uppercase", "2001:DB8::/32", "2001:db8::/32", nullptr},
    {"v6 documentation expanded", "2001:0db8:0000::/48", "2001:db8::/48", nullptr},
    {"v6 link local", "fe80::/10", "fe80::/10", nullptr},
    {"v6 mapped", "::ffff:0:0/96", "::ffff:0.0.0.0/96", nullptr},
    {"v6 mapped dotted", "::ffff:10.0.0.0/104", "::ffff:10.0.0.0/104", nullptr},
    {"v6 slash 127", "2001:db8::/127", "2001:db8::/127", nullptr},
    {"v6 ec2 metadata host", "fd00:ec2::254/128", "fd00:ec2::254/128", nullptr},
    {"v4 host bits set 10", "10.0.0.1/8", nullptr, "host bits set; did you mean 10.0.0.0/8?"},
    {"v4 host bits set 192", "192.168.1.1/16", nullptr, "did you mean 192.168.0.0/16?"},
    {"v4 host bits set slash 0", "1.2.3.4/0", nullptr, "did you mean 0.0.0.0/0?"},
    {"v4 host bits set partial byte", "192.168.1.0/23", nullptr, "did you mean 192.168.0.0/23?"},
    {"v6 host bits set", "fd00::1/8", nullptr, "host bits set; did you mean fd00::/8?"},
    {"v6 host bits set link local", "fe80::1/10", nullptr, "did you mean fe80::/10?"},
    {"v4 length 33", "10.0.0.0/33", nullptr, "prefix length 33 is out of range for IPv4 (0-32)"},
    {"v6 length 129", "::/129", nullptr, "prefix length 129 is out of range for IPv6 (0-128)"},
    {"v4 length 999", "10.0.0.0/999", nullptr, "out of range"},
    {"v4 empty length", "10.0.0.0/", nullptr, "invalid prefix length ''"},
    {"v4 negative length", "10.0.0.0/-1", nullptr, "invalid prefix length '-1'"},
    {"v4 plus length", "10.0.0.0/+8", nullptr, "invalid prefix length"},
    {"v4 leading zero length", "10.0.0.0/08", nullptr, "invalid prefix length '08'"},
    {"v4 two slashes", "10.0.0.0/8/8", nullptr, "invalid prefix length '8/8'"},
    {"v4 space in length", "10.0.0.0/ 8", nullptr, "invalid prefix length"},
    {"v4 letters length", "10.0.0.0/abc", nullptr, "invalid prefix length 'abc'"},
    {"v4 four digit length", "10.0.0.0/1000", nullptr, "invalid prefix length"},
    {"v4 short form", "10/8", nullptr, "'10' is not a canonical IPv4"},
    {"v4 three parts", "10.0.0/24", nullptr, "not a canonical"},
    {"v4 octal part", "010.0.0.0/8", nullptr, "not a canonical"},
    {"v4 leading zero last", "10.0.0.00/8", nullptr, "not a canonical"},
    {"v4 hex part", "0x0a.0.0.0/8", nullptr, "not a canonical"},
    {"v4 trailing dot", "10.0.0.0./8", nullptr, "not a canonical"},
    {"v4 octet 256", "256.0.0.0/8", nullptr, "not a canonical"},
    {"v4 four digit octet", "1000.0.0.0/8", nullptr, "not a canonical"},
    {"v4 five parts", "1.2.3.4.5/32", nullptr, "not a canonical"},
    {"v4 empty part", "10..0.0/8", nullptr, "not a canonical"},
    {"v4 space", " 10.0.0.0/8", nullptr, "not a canonical"},
    {"v4 plus sign octet", "10.+0.0.0/8", nullptr, "not a canonical"},
    {"v6 bracketed", "[::1]/128", nullptr, "not a canonical"},
    {"v6 zone", "fe80::%eth0/64", nullptr, "not a canonical"},
    {"v6 bad", "1::2::3/64", nullptr, "not a canonical"},
    {"empty", "", nullptr, "not a canonical"},
    {"only length", "/8", nullptr, "not a canonical"},
    {"name", "example.com/8", nullptr, "'example.com' is not a canonical"},
};
INSTANTIATE_TEST_SUITE_P(Rows, ParseCidr, testing::ValuesIn(kCidrRows), row_name<CidrRow>);

TEST(ParseCidrError, ErrorPointerMayBeNull) {
  EXPECT_FALSE(parse_cidr("10.0.0.1/8").has_value());
  EXPECT_FALSE(parse_cidr("nonsense", nullptr).has_value());
}

TEST(ParseCidrError, SuccessLeavesErrorUntouched) {
  std::string error = "unchanged";
  ASSERT_TRUE(parse_cidr("10.0.0.0/8", &error).has_value());
  EXPECT_EQ(error, "unchanged");
}

// ---------------------------------------------------------------------------------------------
// Cidr::contains

struct ContainsRow {
  const char* name;
  const char* cidr;
  const char* address;  // any parse_ip_literal spelling
  bool expected;
};

std::ostream& operator<<(std::ostream& os, const ContainsRow& r) {
  return os << r.cidr << " contains " << r.address;
}

class CidrContains : public testing::TestWithParam<ContainsRow> {};

TEST_P(CidrContains, MatchesRange) {
  const ContainsRow& row = GetParam();
  const auto cidr = parse_cidr(row.cidr);
  const auto address = parse_ip_literal(row.address);
  ASSERT_TRUE(cidr.has_value());
  ASSERT_TRUE(address.has_value());
  EXPECT_EQ(cidr->contains(*address), row.expected);
}

const ContainsRow kContainsRows[] = {
    {"10 first", "10.0.0.0/8", "10.0.0.0", true},
    {"10 last", "10.0.0.0/8", "10.255.255.255", true},
    {"10 before", "10.0.0.0/8", "9.255.255.255", false},
    {"10 after", "10.0.0.0/8", "11.0.0.0", false},
    {"10 short spelling", "10.0.0.0/8", "10.1", true},
    {"10 hex spelling", "10.0.0.0/8", "0xa000001", true},
    {"172 first", "172.16.0.0/12", "172.16.0.0", true},
    {"172 last", "172.16.0.0/12", "172.31.255.255", true},
    {"172 before", "172.16.0.0/12", "172.15.255.255", false},
    {"172 after", "172.16.0.0/12", "172.32.0.0", false},
    {"cgnat last", "100.64.0.0/10", "100.127.255.255", true},
    {"cgnat after", "100.64.0.0/10", "100.128.0.0", false},
    {"slash 23 last", "192.168.0.0/23", "192.168.1.255", true},
    {"slash 23 after", "192.168.0.0/23", "192.168.2.0", false},
    {"slash 31 low", "10.0.0.2/31", "10.0.0.2", true},
    {"slash 31 high", "10.0.0.2/31", "10.0.0.3", true},
    {"slash 31 before", "10.0.0.2/31", "10.0.0.1", false},
    {"v4 all low", "0.0.0.0/0", "0.0.0.0", true},
    {"v4 all high", "0.0.0.0/0", "255.255.255.255", true},
    {"v4 all excludes v6", "0.0.0.0/0", "::1", false},
    {"v4 host itself", "1.2.3.4/32", "1.2.3.4", true},
    {"v4 host neighbour", "1.2.3.4/32", "1.2.3.5", false},
    {"v4 range excludes mapped v6", "10.0.0.0/8", "::ffff:10.0.0.1", false},
    {"ula first", "fd00::/8", "fd00::", true},
    {"ula last", "fd00::/8", "fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", true},
    {"ula before", "fd00::/8", "fcff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", false},
    {"ula after", "fd00::/8", "fe00::", false},
    {"link local last", "fe80::/10", "febf:ffff:ffff:ffff:ffff:ffff:ffff:ffff", true},
    {"link local after", "fe80::/10", "fec0::", false},
    {"v6 all", "::/0", "2001:db8::1", true},
    {"v6 all excludes v4", "::/0", "10.0.0.1", false},
    {"v6 host itself", "::1/128", "[::1]", true},
    {"v6 host neighbour", "::1/128", "::2", false},
    {"doc last", "2001:db8::/32", "2001:db8:ffff:ffff:ffff:ffff:ffff:ffff", true},
    {"doc after", "2001:db8::/32", "2001:db9::", false},
    {"slash 127 low", "2001:db8::/127", "2001:db8::1", true},
    {"slash 127 after", "2001:db8::/127", "2001:db8::2", false},
    {"mapped range holds mapped", "::ffff:0:0/96", "::ffff:127.0.0.1", true},
    {"mapped range excludes v4", "::ffff:0:0/96", "127.0.0.1", false},
};
INSTANTIATE_TEST_SUITE_P(Rows, CidrContains, testing::ValuesIn(kContainsRows),
                         row_name<ContainsRow>);

// ---------------------------------------------------------------------------------------------
// embedded_ipv4

struct EmbeddedRow {
  const char* name;
  const char* input;
  const char* expected;  // embedded IPv4 text, or nullptr when none
};

std::ostream& operator<<(std::ostream& os, const EmbeddedRow& r) {
  return os << '"' << r.input << '"';
}

class EmbeddedIpv4 : public testing::TestWithParam<EmbeddedRow> {};

TEST_P(EmbeddedIpv4, Unwraps) {
  const EmbeddedRow& row = GetParam();
  const auto address = parse_ip_literal(row.input);
  ASSERT_TRUE(address.has_value());
  const auto inner = embedded_ipv4(*address);
  if (row.expected == nullptr) {
    EXPECT_FALSE(inner.has_value()) << "unwrapped to " << inner->to_string();
    return;
  }
  ASSERT_TRUE(inner.has_value());
  EXPECT_TRUE(inner->is_v4());
  EXPECT_EQ(inner->to_string(), row.expected);
}

const EmbeddedRow kEmbeddedRows[] = {
    {"mapped loopback", "::ffff:127.0.0.1", "127.0.0.1"},
    {"mapped hex metadata", "::ffff:a9fe:a9fe", "169.254.169.254"},
    {"mapped zero", "::ffff:0:0", "0.0.0.0"},
    {"mapped broadcast", "::ffff:ffff:ffff", "255.255.255.255"},
    {"translated loopback", "::ffff:0:7f00:1", "127.0.0.1"},
    {"translated metadata", "::ffff:0:169.254.169.254", "169.254.169.254"},
    {"compatible loopback", "::127.0.0.1", "127.0.0.1"},
    {"compatible public", "::8.8.8.8", "8.8.8.8"},
    {"compatible two", "::2", "0.0.0.2"},
    {"compatible 0 0 1 0", "::100", "0.0.1.0"},
    {"unspecified is not compatible", "::", nullptr},
    {"loopback is not compatible", "::1", nullptr},
    {"nat64 loopback", "64:ff9b::7f00:1", "127.0.0.1"},
    {"nat64 public dotted", "64:ff9b::8.8.8.8", "8.8.8.8"},
    {"nat64 local use metadata", "64:ff9b:1::a9fe:a9fe", "169.254.169.254"},
    {"nat64 local use subnet", "64:ff9b:1:abcd::7f00:1", "127.0.0.1"},
    {"nat64 local use last", "64:ff9b:1:ffff:ffff:ffff:7f00:1", "127.0.0.1"},
    {"nat64 outside slash 96", "64:ff9b:0:0:0:1:7f00:1", nullptr},
    {"nat64 outside local use", "64:ff9b:2::7f00:1", nullptr},
    {"nat64 wrong prefix", "64:ff9a::7f00:1", nullptr},
    {"6to4 loopback", "2002:7f00:1::", "127.0.0.1"},
    {"6to4 loopback padded", "2002:7f00:0001::", "127.0.0.1"},
    {"6to4 metadata with host", "2002:a9fe:a9fe::1", "169.254.169.254"},
    {"6to4 public", "2002:808:808::", "8.8.8.8"},
    {"6to4 wrong prefix", "2003:7f00:1::", nullptr},
    {"teredo loopback", "2001:0:4136:e378:8000:63bf:80ff:fffe", "127.0.0.1"},
    {"teredo metadata", "2001:0:4136:e378:8000:63bf:5601:5601", "169.254.169.254"},
    {"teredo public", "2001:0:4136:e378:8000:63bf:f7f7:f7f7", "8.8.8.8"},
    {"teredo zero client", "2001::ffff:ffff", "0.0.0.0"},
    {"teredo all zero", "2001::", "255.255.255.255"},
    {"not teredo 2001 1", "2001:1::7f00:1", nullptr},
    {"not teredo documentation", "2001:db8::7f00:1", nullptr},
    {"mapped like with wrong group", "::ffff:1:7f00:1", nullptr},
    {"link local", "fe80::7f00:1", nullptr},
    {"nonzero high groups", "0:0:0:1::7f00:1", nullptr},
    {"public v6", "2606:4700:4700::1111", nullptr},
    {"ipv4 input", "127.0.0.1", nullptr},
};
INSTANTIATE_TEST_SUITE_P(Rows, EmbeddedIpv4, testing::ValuesIn(kEmbeddedRows),
                         row_name<EmbeddedRow>);

}  // namespace
}  // namespace sandgate::policy
