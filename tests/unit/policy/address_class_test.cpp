#include "policy/address_class.hpp"

#include <gtest/gtest.h>

#include <cctype>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "policy/ip_address.hpp"

namespace sandgate::policy {
namespace {

using C = AddressClass;

// GoogleTest parameter names allow only [A-Za-z0-9_]; rows carry free-text names.
std::string param_name(std::string_view text) {
  std::string out;
  for (const char c : text) {
    out += std::isalnum(static_cast<unsigned char>(c)) != 0 ? c : '_';
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// classify

struct ClassRow {
  const char* name;
  const char* input;  // any parse_ip_literal spelling
  AddressClass expected;
};

std::ostream& operator<<(std::ostream& os, const ClassRow& r) {
  return os << '"' << r.input << "\" -> " << class_name(r.expected);
}

class Classify : public testing::TestWithParam<ClassRow> {};

TEST_P(Classify, FollowsIanaRegistry) {
  const ClassRow& row = GetParam();
  const std::optional<IpAddress> address = parse_ip_literal(row.input);
  ASSERT_TRUE(address.has_value()) << "not an IP literal";
  EXPECT_EQ(class_name(classify(*address)), class_name(row.expected));
}

std::string class_row_name(const testing::TestParamInfo<ClassRow>& info) {
  return param_name(info.param.name);
}

// First inside, last inside and just outside each IPv4 special-purpose range.
const ClassRow kIpv4Boundaries[] = {
    {"this network first", "0.0.0.0", C::unspecified},
    {"this network second", "0.0.0.1", C::unspecified},
    {"this network last", "0.255.255.255", C::unspecified},
    {"this network after", "1.0.0.0", C::global},
    {"rfc1918 10 before", "9.255.255.255", C::global},
    {"rfc1918 10 first", "10.0.0.0", C::private_net},
    {"rfc1918 10 middle", "10.1.2.3", C::private_net},
    {"rfc1918 10 last", "10.255.255.255", C::private_net},
    {"rfc1918 10 after", "11.0.0.0", C::global},
    {"cgnat before", "100.63.255.255", C::global},
    {"cgnat first", "100.64.0.0", C::cgnat},
    {"cgnat last", "100.127.255.255", C::cgnat},
    {"cgnat after", "100.128.0.0", C::global},
    {"alibaba metadata", "100.100.100.200", C::metadata},
    {"oracle cloud metadata", "192.0.0.192", C::metadata},
    {"oracle cloud metadata neighbour", "192.0.0.193", C::reserved},
    {"alibaba metadata before", "100.100.100.199", C::cgnat},
    {"alibaba metadata after", "100.100.100.201", C::cgnat},
    {"loopback before", "126.255.255.255", C::global},
    {"loopback first", "127.0.0.0", C::loopback},
    {"loopback usual", "127.0.0.1", C::loopback},
    {"loopback other", "127.1.2.3", C::loopback},
    {"loopback last", "127.255.255.255", C::loopback},
    {"loopback after", "128.0.0.0", C::global},
    {"link local before", "169.253.255.255", C::global},
    {"link local first", "169.254.0.0", C::link_local},
    {"link local before metadata", "169.254.169.253", C::link_local},
    {"metadata", "169.254.169.254", C::metadata},
    {"link local after metadata", "169.254.169.255", C::link_local},
    {"link local ecs task metadata", "169.254.170.2", C::link_local},
    {"link local last", "169.254.255.255", C::link_local},
    {"link local after", "169.255.0.0", C::global},
    {"rfc1918 172 before", "172.15.255.255", C::global},
    {"rfc1918 172 first", "172.16.0.0", C::private_net},
    {"rfc1918 172 last", "172.31.255.255", C::private_net},
    {"rfc1918 172 after", "172.32.0.0", C::global},
    {"protocol assignments before", "191.255.255.255", C::global},
    {"protocol assignments first", "192.0.0.0", C::reserved},
    {"protocol assignments ds lite", "192.0.0.1", C::reserved},
    {"protocol assignments ipv4 dummy", "192.0.0.8", C::reserved},
    {"protocol assignments pcp anycast", "192.0.0.9", C::reserved},
    {"protocol assignments turn anycast", "192.0.0.10", C::reserved},
    {"protocol assignments nat64 discovery 170", "192.0.0.170", C::reserved},
    {"protocol assignments nat64 discovery 171", "192.0.0.171", C::reserved},
    {"protocol assignments last", "192.0.0.255", C::reserved},
    {"protocol assignments after", "192.0.1.0", C::global},
    {"test net 1 before", "192.0.1.255", C::global},
    {"test net 1 first", "192.0.2.0", C::documentation},
    {"test net 1 last", "192.0.2.255", C::documentation},
    {"test net 1 after", "192.0.3.0", C::global},
    {"6to4 relay before", "192.88.98.255", C::global},
    {"6to4 relay first", "192.88.99.0", C::reserved},
    {"6to4 relay anycast", "192.88.99.1", C::reserved},
    {"6to4 relay last", "192.88.99.255", C::reserved},
    {"6to4 relay after", "192.88.100.0", C::global},
    {"rfc1918 192 before", "192.167.255.255", C::global},
    {"rfc1918 192 first", "192.168.0.0", C::private_net},
    {"rfc1918 192 home router", "192.168.1.1", C::private_net},
    {"rfc1918 192 last", "192.168.255.255", C::private_net},
    {"rfc1918 192 after", "192.169.0.0", C::global},
    {"benchmarking before", "198.17.255.255", C::global},
    {"benchmarking first", "198.18.0.0", C::benchmarking},
    {"benchmarking last", "198.19.255.255", C::benchmarking},
    {"benchmarking after", "198.20.0.0", C::global},
    {"test net 2 before", "198.51.99.255", C::global},
    {"test net 2 first", "198.51.100.0", C::documentation},
    {"test net 2 last", "198.51.100.255", C::documentation},
    {"test net 2 after", "198.51.101.0", C::global},
    {"test net 3 before", "203.0.112.255", C::global},
    {"test net 3 first", "203.0.113.0", C::documentation},
    {"test net 3 last", "203.0.113.255", C::documentation},
    {"test net 3 after", "203.0.114.0", C::global},
    {"multicast before", "223.255.255.255", C::global},
    {"multicast first", "224.0.0.0", C::multicast},
    {"multicast all hosts", "224.0.0.1", C::multicast},
    {"multicast mdns", "224.0.0.251", C::multicast},
    {"multicast last", "239.255.255.255", C::multicast},
    {"class e first", "240.0.0.0", C::reserved},
    {"class e middle", "250.1.2.3", C::reserved},
    {"class e last before broadcast", "255.255.255.254", C::reserved},
    {"limited broadcast", "255.255.255.255", C::broadcast},
};
INSTANTIATE_TEST_SUITE_P(Ipv4Boundaries, Classify, testing::ValuesIn(kIpv4Boundaries),
                         class_row_name);

const ClassRow kIpv4Global[] = {
    {"cloudflare dns", "1.1.1.1", C::global},
    {"google dns", "8.8.8.8", C::global},
    {"as112 v4 is global", "192.31.196.1", C::global},
    {"amt relay is global", "192.52.193.1", C::global},
    {"as112 direct delegation is global", "192.175.48.1", C::global},
    {"public next to private", "172.217.0.1", C::global},
    {"public class a top", "126.0.0.1", C::global},
    {"public last unicast", "223.255.255.254", C::global},
};
INSTANTIATE_TEST_SUITE_P(Ipv4Global, Classify, testing::ValuesIn(kIpv4Global), class_row_name);

// Every inet_aton/WHATWG spelling is classified as the address it denotes.
const ClassRow kIpv4Spellings[] = {
    {"loopback two parts", "127.1", C::loopback},
    {"loopback three parts", "127.0.1", C::loopback},
    {"loopback decimal", "2130706433", C::loopback},
    {"loopback hex first", "0x7f.1", C::loopback},
    {"loopback octal first", "0177.0.0.1", C::loopback},
    {"loopback hex", "0x7f000001", C::loopback},
    {"loopback octal", "017700000001", C::loopback},
    {"loopback trailing dot", "127.0.0.1.", C::loopback},
    {"unspecified single zero", "0", C::unspecified},
    {"unspecified bare 0x", "0x", C::unspecified},
    {"broadcast decimal", "4294967295", C::broadcast},
    {"broadcast hex", "0xffffffff", C::broadcast},
    {"metadata hex", "0xa9fea9fe", C::metadata},
    {"metadata decimal", "2852039166", C::metadata},
    {"metadata octal parts", "0251.0376.0251.0376", C::metadata},
    {"metadata three parts", "169.254.43518", C::metadata},
    {"metadata two parts", "169.16689662", C::metadata},
    {"alibaba metadata decimal", "1684301000", C::metadata},
    {"alibaba metadata hex", "0x646464c8", C::metadata},
    {"private two parts", "10.1", C::private_net},
    {"private hex two parts", "0xa.1", C::private_net},
    {"private octal two parts", "012.1", C::private_net},
    {"private decimal", "3232235521", C::private_net},
    {"multicast decimal", "3758096385", C::multicast},
};
INSTANTIATE_TEST_SUITE_P(Ipv4Spellings, Classify, testing::ValuesIn(kIpv4Spellings),
                         class_row_name);

// IPv6 addresses that embed IPv4 are classified by the IPv4 address they reach.
const ClassRow kIpv6Embedded[] = {
    {"mapped loopback", "::ffff:127.0.0.1", C::loopback},
    {"mapped loopback bracketed", "[::ffff:127.0.0.1]", C::loopback},
    {"mapped loopback hex", "::ffff:7f00:1", C::loopback},
    {"mapped loopback hex bracketed", "[::ffff:7f00:1]", C::loopback},
    {"mapped metadata", "::ffff:169.254.169.254", C::metadata},
    {"mapped metadata hex", "::ffff:a9fe:a9fe", C::metadata},
    {"mapped alibaba metadata", "::ffff:100.100.100.200", C::metadata},
    {"mapped link local", "::ffff:169.254.1.1", C::link_local},
    {"mapped private", "::ffff:10.0.0.1", C::private_net},
    {"mapped cgnat", "::ffff:100.64.0.1", C::cgnat},
    {"mapped unspecified", "::ffff:0.0.0.0", C::unspecified},
    {"mapped broadcast", "::ffff:255.255.255.255", C::broadcast},
    {"mapped multicast", "::ffff:224.0.0.1", C::multicast},
    {"mapped documentation", "::ffff:192.0.2.1", C::documentation},
    {"mapped public", "::ffff:8.8.8.8", C::global},
    {"translated loopback", "::ffff:0:7f00:1", C::loopback},
    {"translated metadata", "::ffff:0:a9fe:a9fe", C::metadata},
    {"translated public", "::ffff:0:808:808", C::global},
    {"compatible loopback", "::127.0.0.1", C::loopback},
    {"compatible loopback hex", "::7f00:1", C::loopback},
    {"compatible metadata", "::169.254.169.254", C::metadata},
    {"compatible private", "::10.0.0.1", C::private_net},
    {"compatible this network", "::2", C::unspecified},
    {"compatible public", "::8.8.8.8", C::global},
    {"nat64 loopback", "64:ff9b::7f00:1", C::loopback},
    {"nat64 loopback dotted", "64:ff9b::127.0.0.1", C::loopback},
    {"nat64 metadata", "64:ff9b::a9fe:a9fe", C::metadata},
    {"nat64 private", "64:ff9b::a00:1", C::private_net},
    {"nat64 unspecified", "64:ff9b::", C::unspecified},
    {"nat64 public", "64:ff9b::808:808", C::global},
    {"nat64 local use metadata", "64:ff9b:1::a9fe:a9fe", C::metadata},
    {"nat64 local use loopback", "64:ff9b:1:ffff::7f00:1", C::loopback},
    {"nat64 local use public", "64:ff9b:1::808:808", C::global},
    {"6to4 loopback padded", "2002:7f00:0001::", C::loopback},
    {"6to4 loopback", "2002:7f00:1::", C::loopback},
    {"6to4 metadata", "2002:a9fe:a9fe::", C::metadata},
    {"6to4 private", "2002:a00:1::1", C::private_net},
    {"6to4 relay", "2002:c058:6301::", C::reserved},
    {"6to4 unspecified", "2002::", C::unspecified},
    {"6to4 public", "2002:808:808::1", C::global},
    {"teredo loopback", "2001:0:4136:e378:8000:63bf:80ff:fffe", C::loopback},
    {"teredo metadata", "2001:0:4136:e378:8000:63bf:5601:5601", C::metadata},
    {"teredo private", "2001:0:4136:e378:8000:63bf:f5ff:fffe", C::private_net},
    {"teredo public", "2001:0:4136:e378:8000:63bf:f7f7:f7f7", C::global},
    {"teredo zero client", "2001:0:ffff:ffff:ffff:ffff:ffff:ffff", C::unspecified},
    {"teredo all zero is broadcast client", "2001::", C::broadcast},
};
INSTANTIATE_TEST_SUITE_P(Ipv6Embedded, Classify, testing::ValuesIn(kIpv6Embedded), class_row_name);

const ClassRow kIpv6Boundaries[] = {
    {"unspecified", "::", C::unspecified},
    {"unspecified bracketed", "[::]", C::unspecified},
    {"unspecified expanded", "0:0:0:0:0:0:0:0", C::unspecified},
    {"loopback", "::1", C::loopback},
    {"loopback bracketed", "[::1]", C::loopback},
    {"loopback expanded", "0:0:0:0:0:0:0:1", C::loopback},
    {"discard first", "100::", C::reserved},
    {"discard last", "100::ffff:ffff:ffff:ffff", C::reserved},
    {"dummy prefix first", "100:0:0:1::", C::reserved},
    {"dummy prefix last", "100:0:0:1:ffff:ffff:ffff:ffff", C::reserved},
    {"after dummy prefix", "100:0:0:2::", C::global},
    {"orchid first", "2001:10::", C::reserved},
    {"orchid last", "2001:1f:ffff:ffff:ffff:ffff:ffff:ffff", C::reserved},
    {"orchid v2 first", "2001:20::", C::reserved},
    {"orchid v2 last", "2001:2f:ffff:ffff:ffff:ffff:ffff:ffff", C::reserved},
    {"ietf assignments pcp anycast", "2001:1::1", C::reserved},
    {"ietf assignments turn anycast", "2001:1::2", C::reserved},
    {"ietf assignments amt", "2001:3::1", C::reserved},
    {"ietf assignments as112", "2001:4:112::1", C::reserved},
    {"ietf assignments drone id", "2001:30::1", C::reserved},
    {"ietf assignments last", "2001:1ff:ffff:ffff:ffff:ffff:ffff:ffff", C::reserved},
    {"ietf assignments after", "2001:200::", C::global},
    {"benchmarking before", "2001:1:ffff:ffff:ffff:ffff:ffff:ffff", C::reserved},
    {"benchmarking first", "2001:2::", C::benchmarking},
    {"benchmarking last", "2001:2:0:ffff:ffff:ffff:ffff:ffff", C::benchmarking},
    {"benchmarking after", "2001:2:1::", C::reserved},
    {"documentation before", "2001:db7:ffff:ffff:ffff:ffff:ffff:ffff", C::global},
    {"documentation first", "2001:db8::", C::documentation},
    {"documentation usual", "2001:db8::1", C::documentation},
    {"documentation uppercase", "2001:DB8::1", C::documentation},
    {"documentation last", "2001:db8:ffff:ffff:ffff:ffff:ffff:ffff", C::documentation},
    {"documentation after", "2001:db9::", C::global},
    {"documentation 3fff before", "3ffe:ffff:ffff:ffff:ffff:ffff:ffff:ffff", C::global},
    {"documentation 3fff first", "3fff::", C::documentation},
    {"documentation 3fff last", "3fff:fff:ffff:ffff:ffff:ffff:ffff:ffff", C::documentation},
    {"documentation 3fff after", "3fff:1000::", C::global},
    {"srv6 before", "5eff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", C::global},
    {"srv6 first", "5f00::", C::reserved},
    {"srv6 last", "5f00:ffff:ffff:ffff:ffff:ffff:ffff:ffff", C::reserved},
    {"srv6 after", "5f01::", C::global},
    {"ula before", "fbff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", C::global},
    {"ula first", "fc00::", C::unique_local},
    {"ula fd first", "fd00::", C::unique_local},
    {"ula usual", "fd12:3456:789a::1", C::unique_local},
    {"ula last", "fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", C::unique_local},
    {"ec2 metadata", "fd00:ec2::254", C::metadata},
    {"ec2 metadata uppercase", "FD00:EC2::254", C::metadata},
    {"ec2 metadata bracketed", "[fd00:ec2::254]", C::metadata},
    {"ec2 metadata expanded", "fd00:0ec2:0000:0000:0000:0000:0000:0254", C::metadata},
    {"ec2 metadata before", "fd00:ec2::253", C::unique_local},
    {"ec2 metadata after", "fd00:ec2::255", C::unique_local},
    {"link local first", "fe80::", C::link_local},
    {"link local usual", "fe80::1", C::link_local},
    {"link local last", "febf:ffff:ffff:ffff:ffff:ffff:ffff:ffff", C::link_local},
    {"site local first", "fec0::", C::reserved},
    {"site local last", "feff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", C::reserved},
    {"multicast first", "ff00::", C::multicast},
    {"multicast all nodes", "ff02::1", C::multicast},
    {"multicast mdns", "ff02::fb", C::multicast},
    {"multicast last", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", C::multicast},
    {"nat64 before", "64:ff9a:ffff:ffff:ffff:ffff:ffff:ffff", C::global},
    {"outside local use nat64", "64:ff9b:2::7f00:1", C::global},
    {"6to4 before", "2001:ffff:ffff:ffff:ffff:ffff:ffff:ffff", C::global},
    {"6to4 after", "2003::", C::global},
};
INSTANTIATE_TEST_SUITE_P(Ipv6Boundaries, Classify, testing::ValuesIn(kIpv6Boundaries),
                         class_row_name);

const ClassRow kIpv6Global[] = {
    {"cloudflare dns", "2606:4700:4700::1111", C::global},
    {"google dns", "2001:4860:4860::8888", C::global},
    {"as112 v6 anycast", "2620:4f:8000::1", C::global},
    {"european allocation", "2a00:1450:4001::1", C::global},
    {"first global unicast", "2000::", C::global},
    {"former 6bone", "3ffe:ffff::1", C::global},
};
INSTANTIATE_TEST_SUITE_P(Ipv6Global, Classify, testing::ValuesIn(kIpv6Global), class_row_name);

// ---------------------------------------------------------------------------------------------
// class_name, always_denied, is_special

struct NameRow {
  AddressClass cls;
  const char* name;
  bool denied;
};

std::ostream& operator<<(std::ostream& os, const NameRow& r) {
  return os << r.name;
}

class ClassProperties : public testing::TestWithParam<NameRow> {};

TEST_P(ClassProperties, NameIsStable) {
  EXPECT_EQ(class_name(GetParam().cls), GetParam().name);
}

TEST_P(ClassProperties, AlwaysDenied) {
  EXPECT_EQ(always_denied(GetParam().cls), GetParam().denied);
}

TEST_P(ClassProperties, SpecialUnlessGlobal) {
  EXPECT_EQ(is_special(GetParam().cls), GetParam().cls != C::global);
}

const NameRow kNameRows[] = {
    {C::global, "global", false},
    {C::loopback, "loopback", false},
    {C::unspecified, "unspecified", true},
    {C::private_net, "private", false},
    {C::cgnat, "cgnat", false},
    {C::link_local, "link_local", true},
    {C::metadata, "metadata", true},
    {C::unique_local, "unique_local", false},
    {C::multicast, "multicast", true},
    {C::broadcast, "broadcast", true},
    {C::documentation, "documentation", false},
    {C::benchmarking, "benchmarking", false},
    {C::reserved, "reserved", false},
};
std::string name_row_name(const testing::TestParamInfo<NameRow>& row) {
  return row.param.name;
}

INSTANTIATE_TEST_SUITE_P(Rows, ClassProperties, testing::ValuesIn(kNameRows), name_row_name);

TEST(ClassNames, AreDistinct) {
  std::set<std::string_view> names;
  for (const NameRow& row : kNameRows) names.insert(class_name(row.cls));
  EXPECT_EQ(names.size(), std::size(kNameRows));
}

}  // namespace
}  // namespace sandgate::policy
