#include "policy/policy.hpp"

#include <gtest/gtest.h>

#include "policy/suggestion.hpp"

namespace sandgate::policy {
namespace {

RuleSource rule(const char* text, const char* origin = "sandboxes.sb.allow") {
  auto p = parse_host_pattern(text);
  EXPECT_TRUE(p) << text;
  return {*p, origin};
}
CidrSource cidr(const char* text, const char* origin = "sandboxes.sb.allow_cidrs") {
  auto c = parse_cidr(text);
  EXPECT_TRUE(c) << text;
  return {*c, origin};
}

// The sandbox "sb" used by the decision table below.
std::shared_ptr<const Policy> make_policy() {
  SandboxSpec sb;
  sb.id = "sb";
  sb.ports = {80, 443};
  sb.allow = {rule("github.com"),         rule("*.github.com"),
              rule("github.com:22"),      rule("*.internal.example:8443"),
              rule("registry.npmjs.org"), rule("*.example.org"),
              rule("secret.example.org"), rule("ssh.example.net:22"),
              rule("private.test"),       rule("localhost")};
  sb.deny = {rule("secret.example.org", "sandboxes.sb.deny"),
             rule("*.evil.example.org", "sandboxes.sb.deny"),
             rule("gist.github.com:443", "sandboxes.sb.deny")};
  sb.allow_cidrs = {cidr("10.1.0.0/16"), cidr("127.0.0.0/8"), cidr("203.0.113.7"),
                    cidr("169.254.0.0/16"), cidr("fd00::/8")};
  sb.deny_cidrs = {cidr("10.1.2.0/24", "sandboxes.sb.deny_cidrs")};

  SandboxSpec open;
  open.id = "open";
  open.allow_all_hosts = true;
  open.deny = {rule("blocked.example", "sandboxes.open.deny")};

  SandboxSpec empty;
  empty.id = "empty";

  std::vector<Endpoint> self = {{*parse_ip_literal("127.0.0.1"), 3128}};
  return std::make_shared<const Policy>(std::vector<SandboxSpec>{sb, open, empty}, self);
}

struct DecisionRow {
  const char* name;
  const char* sandbox;
  const char* host;
  std::uint16_t port;
  bool allowed;
  Reason reason;
  const char* rule;  // expected Decision::rule ("" for none)
};

void PrintTo(const DecisionRow& row, std::ostream* os) {
  *os << row.name;
}

class Decide : public testing::TestWithParam<DecisionRow> {};

TEST_P(Decide, MatchesTable) {
  static const auto policy = make_policy();
  const DecisionRow& row = GetParam();
  for (EntryMode mode : {EntryMode::http, EntryMode::connect, EntryMode::tls, EntryMode::tcp}) {
    const Decision d = policy->decide({row.sandbox, row.host, row.port, mode});
    // A nameless stream on a web port needs an `opaque` rule besides (none in this table).
    const bool unrecognized =
        mode == EntryMode::tcp && row.allowed && (row.port == 80 || row.port == 443);
    EXPECT_EQ(d.allowed, row.allowed && !unrecognized) << mode_name(mode);
    EXPECT_EQ(reason_name(d.reason),
              reason_name(unrecognized ? Reason::unrecognized_protocol : row.reason))
        << mode_name(mode);
    EXPECT_EQ(d.rule, row.rule) << mode_name(mode);
  }
}

constexpr auto kRule = Reason::allowed_by_rule;
constexpr auto kCidr = Reason::allowed_by_cidr;
constexpr auto kNoRule = Reason::no_matching_rule;
constexpr auto kDenyRule = Reason::denied_by_rule;
constexpr auto kPort = Reason::port_not_allowed;
constexpr auto kLiteral = Reason::ip_literal_not_allowed;
constexpr auto kSpecial = Reason::special_address;
constexpr auto kAlways = Reason::always_denied_address;

INSTANTIATE_TEST_SUITE_P(
    Table, Decide,
    testing::Values(
        DecisionRow{"exact_443", "sb", "github.com", 443, true, kRule,
                    "sandboxes.sb.allow:github.com"},
        DecisionRow{"exact_80", "sb", "github.com", 80, true, kRule,
                    "sandboxes.sb.allow:github.com"},
        DecisionRow{"exact_upper_dot", "sb", "GitHub.COM.", 443, true, kRule,
                    "sandboxes.sb.allow:github.com"},
        DecisionRow{"exact_explicit_port", "sb", "github.com", 22, true, kRule,
                    "sandboxes.sb.allow:github.com:22"},
        DecisionRow{"exact_wrong_port", "sb", "github.com", 6379, false, kPort,
                    "sandboxes.sb.allow:github.com"},
        DecisionRow{"wildcard_one_level", "sb", "api.github.com", 443, true, kRule,
                    "sandboxes.sb.allow:*.github.com"},
        DecisionRow{"wildcard_deep", "sb", "a.b.c.github.com", 443, true, kRule,
                    "sandboxes.sb.allow:*.github.com"},
        DecisionRow{"wildcard_port_not_inherited", "sb", "api.github.com", 22, false, kPort,
                    "sandboxes.sb.allow:*.github.com"},
        DecisionRow{"lookalike_suffix", "sb", "evilgithub.com", 443, false, kNoRule, ""},
        DecisionRow{"lookalike_prefix", "sb", "github.com.evil.example", 443, false, kNoRule, ""},
        DecisionRow{"wildcard_not_apex", "sb", "example.org", 443, false, kNoRule, ""},
        DecisionRow{"wildcard_pinned_port", "sb", "db.internal.example", 8443, true, kRule,
                    "sandboxes.sb.allow:*.internal.example:8443"},
        DecisionRow{"wildcard_pinned_port_other", "sb", "db.internal.example", 443, false, kPort,
                    "sandboxes.sb.allow:*.internal.example:8443"},
        DecisionRow{"deny_beats_exact_allow", "sb", "secret.example.org", 443, false, kDenyRule,
                    "sandboxes.sb.deny:secret.example.org"},
        DecisionRow{"deny_without_port_covers_all", "sb", "secret.example.org", 8080, false,
                    kDenyRule, "sandboxes.sb.deny:secret.example.org"},
        DecisionRow{"deny_wildcard", "sb", "x.evil.example.org", 443, false, kDenyRule,
                    "sandboxes.sb.deny:*.evil.example.org"},
        DecisionRow{"deny_wildcard_not_apex", "sb", "evil.example.org", 443, true, kRule,
                    "sandboxes.sb.allow:*.example.org"},
        DecisionRow{"deny_pinned_port", "sb", "gist.github.com", 443, false, kDenyRule,
                    "sandboxes.sb.deny:gist.github.com:443"},
        DecisionRow{"deny_pinned_port_other_port", "sb", "gist.github.com", 80, true, kRule,
                    "sandboxes.sb.allow:*.github.com"},
        DecisionRow{"ssh_port_rule", "sb", "ssh.example.net", 22, true, kRule,
                    "sandboxes.sb.allow:ssh.example.net:22"},
        DecisionRow{"ssh_port_rule_443", "sb", "ssh.example.net", 443, false, kPort,
                    "sandboxes.sb.allow:ssh.example.net:22"},
        DecisionRow{"unknown_host", "sb", "example.com", 443, false, kNoRule, ""},
        DecisionRow{"unknown_sandbox", "nope", "github.com", 443, false, Reason::unknown_sandbox,
                    ""},
        DecisionRow{"empty_sandbox_denies_all", "empty", "github.com", 443, false, kNoRule, ""},
        DecisionRow{"invalid_host", "sb", "git hub.com", 443, false, Reason::invalid_host, ""},
        DecisionRow{"invalid_numeric", "sb", "1.2.3.999", 443, false, Reason::invalid_host, ""},
        DecisionRow{"allow_all", "open", "anything.example", 443, true, Reason::allowed_all_hosts,
                    "allow_all_hosts"},
        DecisionRow{"allow_all_port", "open", "anything.example", 22, false, kPort,
                    "allow_all_hosts"},
        DecisionRow{"allow_all_deny_wins", "open", "blocked.example", 443, false, kDenyRule,
                    "sandboxes.open.deny:blocked.example"},
        DecisionRow{"allow_all_no_literals", "open", "8.8.8.8", 443, false, kLiteral, ""},
        DecisionRow{"allow_all_no_loopback", "open", "127.0.0.1", 443, false, kSpecial, ""},
        DecisionRow{"allow_all_no_metadata", "open", "169.254.169.254", 80, false, kAlways, ""},
        // IP literals are addresses, never names, and need an explicit CIDR.
        DecisionRow{"literal_public_no_cidr", "sb", "93.184.216.34", 443, false, kLiteral, ""},
        DecisionRow{"literal_in_cidr", "sb", "10.1.3.4", 443, true, kCidr,
                    "sandboxes.sb.allow_cidrs:10.1.0.0/16"},
        DecisionRow{"literal_in_cidr_wrong_port", "sb", "10.1.3.4", 22, false, kPort,
                    "sandboxes.sb.allow_cidrs:10.1.0.0/16"},
        DecisionRow{"literal_deny_cidr_wins", "sb", "10.1.2.3", 443, false, kDenyRule,
                    "sandboxes.sb.deny_cidrs:10.1.2.0/24"},
        DecisionRow{"literal_single_address", "sb", "203.0.113.7", 443, true, kCidr,
                    "sandboxes.sb.allow_cidrs:203.0.113.7/32"},
        DecisionRow{"literal_private_outside", "sb", "10.2.0.1", 443, false, kSpecial, ""},
        DecisionRow{"literal_short_form_loopback", "sb", "127.1", 80, true, kCidr,
                    "sandboxes.sb.allow_cidrs:127.0.0.0/8"},
        DecisionRow{"literal_decimal_loopback", "sb", "2130706433", 80, true, kCidr,
                    "sandboxes.sb.allow_cidrs:127.0.0.0/8"},
        DecisionRow{"literal_mapped_loopback", "sb", "[::ffff:127.0.0.1]", 80, true, kCidr,
                    "sandboxes.sb.allow_cidrs:127.0.0.0/8"},
        DecisionRow{"literal_mapped_deny_cidr", "sb", "::ffff:10.1.2.3", 80, false, kDenyRule,
                    "sandboxes.sb.deny_cidrs:10.1.2.0/24"},
        DecisionRow{"self_listener", "sb", "127.0.0.1", 3128, false, Reason::proxy_loop, ""},
        DecisionRow{"self_listener_mapped", "sb", "[::ffff:127.0.0.1]", 3128, false,
                    Reason::proxy_loop, ""},
        DecisionRow{"self_listener_short", "sb", "127.1", 3128, false, Reason::proxy_loop, ""},
        DecisionRow{"metadata_even_with_cidr", "sb", "169.254.169.254", 80, false, kAlways, ""},
        DecisionRow{"link_local_even_with_cidr", "sb", "169.254.1.1", 80, false, kAlways, ""},
        DecisionRow{"metadata_v6", "sb", "[fd00:ec2::254]", 80, false, kAlways, ""},
        DecisionRow{"ula_in_cidr", "sb", "[fd12::1]", 443, true, kCidr,
                    "sandboxes.sb.allow_cidrs:fd00::/8"},
        DecisionRow{"unspecified", "sb", "0.0.0.0", 80, false, kAlways, ""},
        DecisionRow{"unspecified_short", "sb", "0", 80, false, kAlways, ""},
        DecisionRow{"broadcast", "sb", "255.255.255.255", 80, false, kAlways, ""},
        DecisionRow{"multicast", "sb", "224.0.0.1", 80, false, kAlways, ""},
        DecisionRow{"nat64_metadata", "sb", "[64:ff9b::a9fe:a9fe]", 80, false, kAlways, ""},
        // A name is a name: "localhost" and "private.test" are allowed here as names; their
        // resolved addresses still go through check_address.
        DecisionRow{"localhost_name_allowed", "sb", "localhost", 80, true, kRule,
                    "sandboxes.sb.allow:localhost"}));

struct AddressRow {
  const char* name;
  const char* sandbox;
  const char* address;
  std::uint16_t port;
  bool allowed;
  Reason reason;
};

void PrintTo(const AddressRow& row, std::ostream* os) {
  *os << row.name;
}

class CheckAddress : public testing::TestWithParam<AddressRow> {};

TEST_P(CheckAddress, MatchesTable) {
  static const auto policy = make_policy();
  const AddressRow& row = GetParam();
  const auto address = parse_ip_literal(row.address);
  ASSERT_TRUE(address) << row.address;
  const Decision d = policy->check_address(row.sandbox, *address, row.port, AddressSet{});
  EXPECT_EQ(d.allowed, row.allowed);
  EXPECT_EQ(reason_name(d.reason), reason_name(row.reason));
}

INSTANTIATE_TEST_SUITE_P(
    Table, CheckAddress,
    testing::Values(
        AddressRow{"public", "sb", "93.184.216.34", 443, true, kRule},
        AddressRow{"public_v6", "sb", "2606:2800:220:1::1", 443, true, kRule},
        AddressRow{"rebind_loopback_allowed_by_cidr", "sb", "127.0.0.1", 80, true, kCidr},
        AddressRow{"rebind_loopback_open_sandbox", "open", "127.0.0.1", 80, false, kSpecial},
        AddressRow{"rebind_private", "open", "192.168.1.1", 80, false, kSpecial},
        AddressRow{"rebind_cgnat", "open", "100.64.0.1", 80, false, kSpecial},
        AddressRow{"rebind_mapped_private", "open", "::ffff:10.0.0.1", 80, false, kSpecial},
        AddressRow{"rebind_6to4_loopback", "open", "2002:7f00:1::", 80, false, kSpecial},
        // An IPv4 allow range opens translated forms (mapped, NAT64), never tunnelled ones.
        AddressRow{"nat64_loopback_in_v4_cidr", "sb", "64:ff9b::7f00:1", 80, true, kCidr},
        AddressRow{"mapped_loopback_in_v4_cidr", "sb", "::ffff:127.0.0.1", 80, true, kCidr},
        AddressRow{"6to4_loopback_not_opened_by_v4_cidr", "sb", "2002:7f00:1::", 80, false,
                   kSpecial},
        AddressRow{"compat_loopback_not_opened_by_v4_cidr", "sb", "::127.0.0.1", 80, false,
                   kSpecial},
        AddressRow{"teredo_loopback_not_opened_by_v4_cidr", "sb",
                   "2001:0:4136:e378:8000:63bf:80ff:fffe", 80, false, kSpecial},
        AddressRow{"6to4_private_outside_still_denied", "sb", "2002:a01:203::", 80, false,
                   kDenyRule},
        AddressRow{"rebind_metadata", "sb", "169.254.169.254", 80, false, kAlways},
        AddressRow{"rebind_ula", "open", "fd00::1", 80, false, kSpecial},
        AddressRow{"ula_in_cidr", "sb", "fd00::1", 80, true, kCidr},
        AddressRow{"deny_cidr", "sb", "10.1.2.200", 80, false, kDenyRule},
        AddressRow{"loop", "sb", "127.0.0.1", 3128, false, Reason::proxy_loop},
        AddressRow{"unknown_sandbox", "zzz", "93.184.216.34", 443, false,
                   Reason::unknown_sandbox}));

// A DNS question has no port: a name resolves when some port of it is allowed.
TEST(Policy, DnsQuestionsAskForAnyPort) {
  const auto policy = make_policy();
  const auto dns = [&](const char* sandbox, const char* host) {
    return policy->decide(sandbox, normalize_host(host), 0, EntryMode::dns);
  };
  EXPECT_TRUE(dns("sb", "github.com").allowed);
  EXPECT_TRUE(dns("sb", "ssh.example.net").allowed);      // only :22 is allowed
  EXPECT_TRUE(dns("sb", "a.internal.example").allowed);   // only :8443
  EXPECT_TRUE(dns("sb", "gist.github.com").allowed);      // denied on :443 only
  EXPECT_FALSE(dns("sb", "secret.example.org").allowed);  // denied on every port
  EXPECT_EQ(dns("sb", "x.evil.example.org").reason, Reason::denied_by_rule);
  EXPECT_EQ(dns("sb", "example.com").reason, Reason::no_matching_rule);
  EXPECT_TRUE(dns("open", "anything.example").allowed);
  EXPECT_FALSE(dns("open", "blocked.example").allowed);
  EXPECT_EQ(dns("nobody", "github.com").reason, Reason::unknown_sandbox);
  // Port 0 is "any" only for DNS; other modes keep refusing it.
  EXPECT_FALSE(policy->decide("sb", normalize_host("github.com"), 0, EntryMode::tcp).allowed);

  SandboxSpec no_ports;
  no_ports.id = "np";
  no_ports.ports = {};
  no_ports.allow = {rule("a.test"), rule("b.test:22")};
  const Policy p({no_ports}, {});
  EXPECT_FALSE(p.decide("np", normalize_host("a.test"), 0, EntryMode::dns).allowed);
  EXPECT_TRUE(p.decide("np", normalize_host("b.test"), 0, EntryMode::dns).allowed);
}

TEST(Policy, SandboxLookup) {
  const auto policy = make_policy();
  EXPECT_TRUE(policy->has_sandbox("sb"));
  EXPECT_FALSE(policy->has_sandbox("SB"));
  EXPECT_EQ(policy->sandbox_count(), 3u);
}

TEST(Policy, ManyRulesStillExact) {
  SandboxSpec sb;
  sb.id = "big";
  for (int i = 0; i < 20000; ++i) {
    sb.allow.push_back(rule(("host" + std::to_string(i) + ".example.com").c_str()));
    sb.allow.push_back(rule(("*.zone" + std::to_string(i) + ".example.net").c_str()));
  }
  const Policy policy({sb}, {});
  EXPECT_TRUE(policy.decide({"big", "host19999.example.com", 443, EntryMode::http}).allowed);
  EXPECT_TRUE(policy.decide({"big", "a.zone7.example.net", 443, EntryMode::http}).allowed);
  EXPECT_FALSE(policy.decide({"big", "zone7.example.net", 443, EntryMode::http}).allowed);
  EXPECT_FALSE(policy.decide({"big", "host20000.example.com", 443, EntryMode::http}).allowed);
}

// ---------------------------------------------------------------------------------------------
// The host's own addresses (THREATS 28): the live interface addresses passed in and the
// launcher's pool are never a destination, whatever a range says, unless allow_host_services
// names the exact address and port. Loopback is opened only by a range inside loopback.

IpAddress ip(const char* text) {
  const auto a = parse_ip_literal(text);
  EXPECT_TRUE(a) << text;
  return a.value_or(IpAddress{});
}

HostServiceSource service(const char* address, std::uint16_t port, const char* origin) {
  return {{ip(address), port}, origin};
}

std::shared_ptr<const Policy> make_host_policy() {
  const auto sandbox = [](const char* id, std::vector<const char*> cidrs) {
    SandboxSpec s;
    s.id = id;
    for (const char* c : cidrs) s.allow_cidrs.push_back(cidr(c));
    return s;
  };
  SandboxSpec none = sandbox("none", {});
  none.allow_all_hosts = true;
  SandboxSpec wide = sandbox("wide", {"0.0.0.0/0", "::/0"});
  wide.allow_all_hosts = true;
  const SandboxSpec wide1 = sandbox("wide1", {"0.0.0.0/1"});
  const SandboxSpec lan = sandbox("lan", {"10.0.0.0/8"});
  const SandboxSpec loop = sandbox("loop", {"127.0.0.0/8", "::1/128"});
  const SandboxSpec both = sandbox("both", {"0.0.0.0/0", "127.0.0.0/8"});
  SandboxSpec svc = sandbox("svc", {"0.0.0.0/0"});
  svc.allow_host_services = {service("8.8.4.4", 8080, "sandboxes.svc.allow_host_services"),
                             service("10.201.0.1", 8080, "profiles.dev.allow_host_services"),
                             service("2001:4860::1", 8080, "sandboxes.svc.allow_host_services"),
                             service("10.201.0.5", 8080, "sandboxes.svc.allow_host_services"),
                             service("10.201.0.1", 3128, "sandboxes.svc.allow_host_services")};
  svc.deny_cidrs = {cidr("10.201.0.4/30", "sandboxes.svc.deny_cidrs")};
  // A wildcard listener on 3128 and the admin listener on loopback.
  std::vector<Endpoint> self = {{ip("0.0.0.0"), 3128}, {ip("127.0.0.1"), 9090}};
  return std::make_shared<const Policy>(
      std::vector<SandboxSpec>{none, wide, wide1, lan, loop, both, svc}, self,
      std::vector<Cidr>{*parse_cidr("10.201.0.0/16")});
}

// The host's interfaces in these rows: a public-looking address, a docker bridge, an IPv6
// global address, and loopback.
const AddressSet& host_set() {
  static const AddressSet set(
      {ip("8.8.4.4"), ip("172.17.0.1"), ip("2001:4860::1"), ip("127.0.0.1"), ip("::1")});
  return set;
}

struct HostRow {
  const char* name;
  const char* sandbox;
  const char* address;
  std::uint16_t port;
  Reason reason;
  const char* rule = "";
};

void PrintTo(const HostRow& row, std::ostream* os) {
  *os << row.name;
}

class HostAddresses : public testing::TestWithParam<HostRow> {};

TEST_P(HostAddresses, CheckAddress) {
  static const auto policy = make_host_policy();
  const HostRow& row = GetParam();
  const Decision d = policy->check_address(row.sandbox, ip(row.address), row.port, host_set());
  EXPECT_EQ(reason_name(d.reason), reason_name(row.reason));
  EXPECT_EQ(d.allowed, row.reason == kCidr || row.reason == kRule ||
                           row.reason == Reason::allowed_host_service);
  EXPECT_EQ(d.rule, row.rule);
}

constexpr auto kHost = Reason::host_address;
constexpr auto kService = Reason::allowed_host_service;
constexpr auto kLoop = Reason::proxy_loop;

INSTANTIATE_TEST_SUITE_P(
    Table, HostAddresses,
    testing::Values(
        HostRow{"host_global_no_cidr", "none", "8.8.4.4", 443, kHost},
        HostRow{"host_global_any_port", "none", "8.8.4.4", 8080, kHost},
        HostRow{"host_global_wide_cidr", "wide", "8.8.4.4", 443, kHost},
        HostRow{"host_global_half_cidr", "wide1", "8.8.4.4", 443, kHost},
        HostRow{"host_docker_bridge_wide", "wide", "172.17.0.1", 443, kHost},
        HostRow{"host_v6_wide", "wide", "2001:4860::1", 443, kHost},
        HostRow{"host_mapped", "wide", "::ffff:8.8.4.4", 443, kHost},
        HostRow{"host_nat64", "wide", "64:ff9b::808:404", 443, kHost},
        HostRow{"host_6to4", "wide", "2002:808:404::", 443, kHost},
        HostRow{"not_host_wide", "wide", "8.8.8.8", 443, kCidr,
                "sandboxes.sb.allow_cidrs:0.0.0.0/0"},
        HostRow{"not_host_no_cidr", "none", "8.8.8.8", 443, kRule},
        HostRow{"pool_gateway_lan", "lan", "10.201.0.1", 80, kHost},
        HostRow{"pool_other_sandbox_lan", "lan", "10.201.3.6", 443, kHost},
        HostRow{"pool_mapped_lan", "lan", "::ffff:10.201.0.1", 80, kHost},
        HostRow{"pool_wide", "wide", "10.201.255.254", 443, kHost},
        HostRow{"lan_outside_pool", "lan", "10.1.2.3", 443, kCidr,
                "sandboxes.sb.allow_cidrs:10.0.0.0/8"},
        HostRow{"service_exact", "svc", "8.8.4.4", 8080, kService,
                "sandboxes.svc.allow_host_services:8.8.4.4:8080"},
        HostRow{"service_other_port", "svc", "8.8.4.4", 8081, kHost},
        HostRow{"service_pool", "svc", "10.201.0.1", 8080, kService,
                "profiles.dev.allow_host_services:10.201.0.1:8080"},
        HostRow{"service_pool_other_port", "svc", "10.201.0.1", 443, kHost},
        HostRow{"service_mapped", "svc", "::ffff:10.201.0.1", 8080, kService,
                "profiles.dev.allow_host_services:10.201.0.1:8080"},
        HostRow{"service_tunnelled_form_not_opened", "svc", "2002:ac9:1::", 8080, kHost},
        HostRow{"service_v6", "svc", "2001:4860::1", 8080, kService,
                "sandboxes.svc.allow_host_services:[2001:4860::1]:8080"},
        HostRow{"service_deny_cidr_wins", "svc", "10.201.0.5", 8080, kDenyRule,
                "sandboxes.svc.deny_cidrs:10.201.0.4/30"},
        HostRow{"wildcard_listener_host", "wide", "8.8.4.4", 3128, kLoop},
        HostRow{"wildcard_listener_pool", "wide", "10.201.0.1", 3128, kLoop},
        HostRow{"wildcard_listener_loopback", "wide", "127.0.0.2", 3128, kLoop},
        HostRow{"wildcard_listener_beats_service", "svc", "10.201.0.1", 3128, kLoop},
        HostRow{"wildcard_listener_not_elsewhere", "wide", "8.8.8.8", 3128, kCidr,
                "sandboxes.sb.allow_cidrs:0.0.0.0/0"},
        HostRow{"admin_listener", "loop", "127.0.0.1", 9090, kLoop},
        HostRow{"loopback_range_opens", "loop", "127.0.0.1", 80, kCidr,
                "sandboxes.sb.allow_cidrs:127.0.0.0/8"},
        HostRow{"loopback_not_interface_address", "loop", "127.3.4.5", 80, kCidr,
                "sandboxes.sb.allow_cidrs:127.0.0.0/8"},
        HostRow{"loopback_v6_opens", "loop", "::1", 80, kCidr, "sandboxes.sb.allow_cidrs:::1/128"},
        HostRow{"loopback_mapped_opens", "loop", "::ffff:127.0.0.1", 80, kCidr,
                "sandboxes.sb.allow_cidrs:127.0.0.0/8"},
        HostRow{"loopback_wide_does_not_open", "wide", "127.0.0.1", 80, kSpecial},
        HostRow{"loopback_half_does_not_open", "wide1", "127.0.0.1", 80, kSpecial},
        HostRow{"loopback_v6_wide_does_not_open", "wide", "::1", 80, kSpecial},
        HostRow{"loopback_mapped_wide_does_not_open", "wide", "::ffff:127.0.0.1", 80, kSpecial},
        HostRow{"loopback_lan_does_not_open", "lan", "127.0.0.1", 80, kSpecial},
        HostRow{"loopback_narrow_beats_wide", "both", "127.0.0.1", 80, kCidr,
                "sandboxes.sb.allow_cidrs:127.0.0.0/8"},
        HostRow{"metadata_before_host", "wide", "169.254.169.254", 80, kAlways}));

// The live set decides: the same address is an ordinary one when no interface has it, and
// the host's own when one does.
TEST(HostAddresses, TheLiveSetIsWhatCounts) {
  const auto policy = make_host_policy();
  const IpAddress a = ip("198.18.7.7");
  EXPECT_EQ(policy->check_address("wide", a, 443, AddressSet{}).reason, kCidr);
  EXPECT_EQ(policy->check_address("wide", a, 443, AddressSet({a})).reason, kHost);
  EXPECT_EQ(policy->check_address("none", a, 443, AddressSet{}).reason, kSpecial);
  // The pool needs no live set: the launcher's links are refused before they exist.
  EXPECT_EQ(policy->check_address("lan", ip("10.201.9.1"), 443, AddressSet{}).reason, kHost);
}

// An IP literal is decided with the pool (decide has no live set; the dialler checks again),
// and an exact allow_host_services entry opens it on its port even outside `ports`.
TEST(HostAddresses, LiteralsAreDecidedWithThePool) {
  const auto policy = make_host_policy();
  const auto decide = [&](const char* sandbox, const char* host, std::uint16_t port) {
    return policy->decide({sandbox, host, port, EntryMode::connect});
  };
  EXPECT_EQ(decide("lan", "10.201.0.1", 80).reason, kHost);
  EXPECT_EQ(decide("lan", "[::ffff:10.201.0.1]", 80).reason, kHost);
  EXPECT_EQ(decide("svc", "10.201.0.1", 8080).reason, kService);
  EXPECT_TRUE(decide("svc", "10.201.0.1", 8080).allowed);
  EXPECT_EQ(decide("svc", "10.201.0.1", 8081).reason, kHost);
  EXPECT_EQ(decide("lan", "10.1.2.3", 443).reason, kCidr);
  EXPECT_EQ(decide("wide", "127.0.0.1", 443).reason, kSpecial);
  EXPECT_EQ(decide("wide", "8.8.4.4", 443).reason, kCidr);  // known to the dialler only
}

struct SuggestRow {
  const char* host;
  std::uint16_t port;
  Reason reason;
  const char* expected;
};

class Suggest : public testing::TestWithParam<SuggestRow> {};

TEST_P(Suggest, Line) {
  const SuggestRow& row = GetParam();
  Decision d;
  d.reason = row.reason;
  d.address_class = AddressClass::link_local;
  const Suggestion s = suggest(SandboxHome{}, normalize_host(row.host), row.port, d);
  EXPECT_EQ(s.toml, row.expected);
  EXPECT_EQ(s.why_none.empty(), std::string_view(row.expected) != "") << s.why_none;
}

INSTANTIATE_TEST_SUITE_P(
    Table, Suggest,
    testing::Values(SuggestRow{"API.example.com", 443, kNoRule,
                               "allow = [\"api.example.com:443\"]"},
                    SuggestRow{"github.com", 22, kPort, "allow = [\"github.com:22\"]"},
                    SuggestRow{"10.0.0.5", 80, kLiteral, "allow_cidrs = [\"10.0.0.5/32\"]"},
                    // A port outside `ports`: a range would leave it port_not_allowed.
                    SuggestRow{"8.8.8.8", 53, kLiteral, "allow_host_services = [\"8.8.8.8:53\"]"},
                    SuggestRow{"::ffff:8.8.8.8", 443, kLiteral, "allow_cidrs = [\"8.8.8.8/32\"]"},
                    SuggestRow{"::1", 80, kSpecial, "allow_cidrs = [\"::1/128\"]"},
                    SuggestRow{"169.254.169.254", 80, kAlways, ""},
                    SuggestRow{"10.201.0.1", 8080, Reason::host_address,
                               "allow_host_services = [\"10.201.0.1:8080\"]"},
                    SuggestRow{"2001:db8::1", 443, Reason::host_address,
                               "allow_host_services = [\"[2001:db8::1]:443\"]"},
                    SuggestRow{"host.example", 443, Reason::host_address, ""},
                    SuggestRow{"::ffff:10.201.0.1", 80, Reason::host_address,
                               "allow_host_services = [\"10.201.0.1:80\"]"},
                    SuggestRow{"2002:ac9:1::", 80, Reason::host_address, ""},
                    SuggestRow{"x.example", 443, kDenyRule, ""},
                    SuggestRow{"bad host", 443, Reason::invalid_host, ""}));

}  // namespace
}  // namespace sandgate::policy

namespace sandgate::policy {
namespace {

// The sandbox "web" for the stream-level tables below.
std::shared_ptr<const Policy> make_stream_policy() {
  SandboxSpec web;
  web.id = "web";
  web.allow = {rule("origin.test"), rule("other.test"), rule("ssh.origin.test"),
               rule("origin.test:8080"), rule("*.wild.test")};
  web.deny = {rule("bad.origin.test", "sandboxes.web.deny")};
  web.allow_cidrs = {cidr("198.18.0.0/15")};
  web.opaque = {rule("ssh.origin.test:443", "sandboxes.web.opaque")};
  // Allowed, but each request decided: inside another host's spliced tunnel they are fronting.
  web.allow.push_back(rule("inspected.test"));
  web.inspect = {rule("inspected.test", "sandboxes.web.inspect")};
  HttpRule api;
  api.hosts = {*parse_host_pattern("api.wild.test")};
  api.allow = true;
  api.origin = "sandboxes.web.http_rules[0]";
  web.http_rules = {api};
  return std::make_shared<const Policy>(std::vector<SandboxSpec>{web}, std::vector<Endpoint>{});
}

struct StreamRow {
  const char* name;
  const char* host;
  std::uint16_t port;
  EntryMode mode;
  bool allowed;
  Reason reason;
};

void PrintTo(const StreamRow& row, std::ostream* os) {
  *os << row.name;
}

class NamelessStream : public testing::TestWithParam<StreamRow> {};

TEST_P(NamelessStream, OnWebPortsNeedsAnOpaqueRule) {  // THREATS 27
  static const auto policy = make_stream_policy();
  const StreamRow& row = GetParam();
  const Decision d = policy->decide({"web", row.host, row.port, row.mode});
  EXPECT_EQ(d.allowed, row.allowed);
  EXPECT_EQ(reason_name(d.reason), reason_name(row.reason));
}

INSTANTIATE_TEST_SUITE_P(
    Table, NamelessStream,
    testing::Values(StreamRow{"tcp_on_443_is_unrecognized", "origin.test", 443, EntryMode::tcp,
                              false, Reason::unrecognized_protocol},
                    StreamRow{"tcp_on_80_is_unrecognized", "origin.test", 80, EntryMode::tcp, false,
                              Reason::unrecognized_protocol},
                    StreamRow{"tcp_on_other_allowed_port_passes", "origin.test", 8080,
                              EntryMode::tcp, true, Reason::allowed_by_rule},
                    StreamRow{"opaque_rule_opens_its_port", "ssh.origin.test", 443, EntryMode::tcp,
                              true, Reason::allowed_by_rule},
                    StreamRow{"opaque_rule_is_exact_to_its_port", "ssh.origin.test", 80,
                              EntryMode::tcp, false, Reason::unrecognized_protocol},
                    StreamRow{"opaque_rule_does_not_allow_by_itself", "ssh.other.test", 443,
                              EntryMode::tcp, false, Reason::no_matching_rule},
                    StreamRow{"deny_still_beats_everything", "bad.origin.test", 443, EntryMode::tcp,
                              false, Reason::denied_by_rule},
                    StreamRow{"address_on_443_is_unrecognized", "198.18.0.1", 443, EntryMode::tcp,
                              false, Reason::unrecognized_protocol},
                    StreamRow{"tls_without_sni_on_443_is_not_this_rule", "origin.test", 443,
                              EntryMode::tls, true, Reason::allowed_by_rule},
                    StreamRow{"http_is_not_this_rule", "origin.test", 80, EntryMode::http, true,
                              Reason::allowed_by_rule}),
    [](const auto& row) { return std::string(row.param.name); });

struct InnerRow {
  const char* name;
  const char* tunnel;  // the host the tunnel was opened for
  const char* inner;   // SNI or Host; nullptr: none
  EntryMode mode;      // tls (SNI) or http (Host)
  bool allowed;
  Reason reason;
};

void PrintTo(const InnerRow& row, std::ostream* os) {
  *os << row.name;
}

class InnerName : public testing::TestWithParam<InnerRow> {};

TEST_P(InnerName, MustNameTheTunnelOrAnAllowedHost) {  // THREATS 4
  static const auto policy = make_stream_policy();
  const InnerRow& row = GetParam();
  const std::string inner = row.inner ? row.inner : "";
  const Decision d = policy->decide_inner_name("web", normalize_host(row.tunnel), 443,
                                               row.inner ? &inner : nullptr, row.mode);
  EXPECT_EQ(d.allowed, row.allowed);
  EXPECT_EQ(reason_name(d.reason), reason_name(row.reason));
}

INSTANTIATE_TEST_SUITE_P(
    Table, InnerName,
    testing::Values(InnerRow{"sni_same_name", "origin.test", "origin.test", EntryMode::tls, true,
                             Reason::allowed_by_rule},
                    InnerRow{"sni_same_name_other_spelling", "origin.test", "ORIGIN.test.",
                             EntryMode::tls, true, Reason::allowed_by_rule},
                    InnerRow{"sni_other_allowed_host", "origin.test", "other.test", EntryMode::tls,
                             true, Reason::allowed_by_rule},
                    InnerRow{"sni_forbidden_host", "origin.test", "forbidden.example",
                             EntryMode::tls, false, Reason::sni_mismatch},
                    InnerRow{"sni_denied_host", "origin.test", "bad.origin.test", EntryMode::tls,
                             false, Reason::sni_mismatch},
                    InnerRow{"sni_invalid", "origin.test", "bad name", EntryMode::tls, false,
                             Reason::sni_mismatch},
                    InnerRow{"no_sni_to_a_name", "origin.test", nullptr, EntryMode::tls, false,
                             Reason::sni_missing},
                    InnerRow{"no_sni_to_an_address", "198.18.0.1", nullptr, EntryMode::tls, true,
                             Reason::allowed_by_rule},
                    InnerRow{"host_same_name", "origin.test", "origin.test", EntryMode::http, true,
                             Reason::allowed_by_rule},
                    InnerRow{"host_same_address", "198.18.0.1", "198.18.0.1", EntryMode::http, true,
                             Reason::allowed_by_rule},
                    InnerRow{"host_forbidden", "origin.test", "forbidden.example", EntryMode::http,
                             false, Reason::host_mismatch},
                    InnerRow{"host_allowed_elsewhere", "origin.test", "x.wild.test",
                             EntryMode::http, true, Reason::allowed_by_rule},
                    InnerRow{"host_missing_http10", "origin.test", nullptr, EntryMode::http, true,
                             Reason::allowed_by_rule},
                    // A host whose requests are decided one by one never rides a spliced tunnel.
                    InnerRow{"sni_inspected_host", "origin.test", "inspected.test", EntryMode::tls,
                             false, Reason::sni_mismatch},
                    InnerRow{"sni_host_with_http_rules", "origin.test", "api.wild.test",
                             EntryMode::tls, false, Reason::sni_mismatch},
                    InnerRow{"sni_inspected_in_an_address_tunnel", "198.18.0.1", "inspected.test",
                             EntryMode::tls, false, Reason::sni_mismatch},
                    InnerRow{"host_inspected_host", "origin.test", "Inspected.Test.",
                             EntryMode::http, false, Reason::host_mismatch},
                    InnerRow{"host_with_http_rules", "x.wild.test", "api.wild.test",
                             EntryMode::http, false, Reason::host_mismatch}),
    [](const auto& row) { return std::string(row.param.name); });

// The one refusal of a misused placeholder, wherever the tripwire saw it (head or body, either
// wire): whose it was names the rule; an unknown one names none.
TEST(PlaceholderDenial, NamesTheCredentialAndKeepsTheGitView) {
  const Decision known = placeholder_denial("gh");
  EXPECT_FALSE(known.allowed);
  EXPECT_EQ(known.reason, Reason::placeholder_misuse);
  EXPECT_EQ(known.rule, "credentials.gh");
  EXPECT_EQ(placeholder_denial("").rule, "");
  GitRequest git;
  git.repo = "acme/widgets";
  EXPECT_EQ(placeholder_denial("gh", git).git.repo, "acme/widgets");
}

}  // namespace
}  // namespace sandgate::policy

namespace sandgate::policy {
namespace {

// unlisted = "hold": a name no rule allows or denies is held (no_matching_rule, held), and an
// operator's grant turns it into allowed_by_operator. What a rule decides, an address, a DNS
// question and a sandbox that refuses unlisted names are never held.
struct HoldRow {
  const char* name;
  const char* sandbox;
  const char* host;
  std::uint16_t port;
  EntryMode mode;
  bool granted;
  bool allowed;
  bool held;
  Reason reason;
};

class Hold : public ::testing::TestWithParam<HoldRow> {};

TEST_P(Hold, MatchesTable) {
  SandboxSpec asks;
  asks.id = "asks";
  asks.hold_unlisted = true;
  asks.allow = {rule("github.com"), rule("pypi.org:8443")};
  asks.deny = {rule("evil.example", "sandboxes.asks.deny")};
  asks.allow_cidrs = {cidr("10.1.0.0/16")};
  SandboxSpec refuses;
  refuses.id = "refuses";
  const Policy policy({asks, refuses}, {});
  const HoldRow& row = GetParam();
  const Decision d =
      policy.decide(row.sandbox, normalize_host(row.host), row.port, row.mode, row.granted);
  EXPECT_EQ(d.allowed, row.allowed);
  EXPECT_EQ(d.held, row.held);
  EXPECT_EQ(reason_name(d.reason), reason_name(row.reason));
}

INSTANTIATE_TEST_SUITE_P(
    Rows, Hold,
    ::testing::Values(HoldRow{"Unlisted", "asks", "example.com", 443, EntryMode::connect, false,
                              false, true, Reason::no_matching_rule},
                      HoldRow{"UnlistedGranted", "asks", "example.com", 443, EntryMode::connect,
                              true, true, false, Reason::allowed_by_operator},
                      HoldRow{"UnlistedHttp", "asks", "example.com", 80, EntryMode::http, false,
                              false, true, Reason::no_matching_rule},
                      HoldRow{"Allowed", "asks", "github.com", 443, EntryMode::connect, false, true,
                              false, Reason::allowed_by_rule},
                      HoldRow{"Denied", "asks", "evil.example", 443, EntryMode::connect, true,
                              false, false, Reason::denied_by_rule},
                      HoldRow{"OtherPortOfAnAllowedName", "asks", "pypi.org", 443,
                              EntryMode::connect, true, false, false, Reason::port_not_allowed},
                      HoldRow{"DnsQuestion", "asks", "example.com", 0, EntryMode::dns, false, false,
                              true, Reason::no_matching_rule},
                      HoldRow{"DnsQuestionGranted", "asks", "example.com", 0, EntryMode::dns, true,
                              true, false, Reason::allowed_by_operator},
                      HoldRow{"Address", "asks", "8.8.8.8", 443, EntryMode::connect, true, false,
                              false, Reason::ip_literal_not_allowed},
                      HoldRow{"SandboxThatRefuses", "refuses", "example.com", 443,
                              EntryMode::connect, true, false, false, Reason::no_matching_rule}),
    [](const auto& row) { return std::string(row.param.name); });

}  // namespace
}  // namespace sandgate::policy
