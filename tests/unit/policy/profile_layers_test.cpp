// A sandbox with a profile is compiled in two layers (the profile's rules, shared, then its
// own); it must decide exactly as the one merged list it stands for (policy::merged). Each
// row is asked of both policies, and of a policy built incrementally from another.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "policy/policy.hpp"
#include "policy/request.hpp"

namespace sandgate::policy {
namespace {

RuleSource rule(const char* text, const char* origin) {
  return {*parse_host_pattern(text), origin};
}
CidrSource cidr(const char* text, const char* origin) {
  return {*parse_cidr(text), origin};
}
HostServiceSource service(const char* address, std::uint16_t port, const char* origin) {
  return {{*parse_ip_literal(address), port}, origin};
}

HttpRule http_rule(const char* host, std::vector<std::string> methods, const char* path, bool allow,
                   RuleMode mode, const char* origin) {
  HttpRule r;
  r.hosts = {*parse_host_pattern(host)};
  r.methods = std::move(methods);
  if (path != nullptr) r.paths = {*PathGlob::parse(path)};
  r.allow = allow;
  r.mode = mode;
  r.origin = origin;
  return r;
}

GitRule git_rule(const char* repo, bool fetch, bool push, const char* origin) {
  GitRule r;
  r.repos = {*parse_repo_pattern(repo)};
  r.fetch = fetch;
  r.push = push;
  r.origin = origin;
  return r;
}

// A profile and a sandbox whose rules overlap wherever order could matter.
std::shared_ptr<const RuleLists> profile_lists() {
  auto p = std::make_shared<RuleLists>();
  p->allow = {
      rule("both.example", "profiles.p.allow"),   rule("api.example:8443", "profiles.p.allow"),
      rule("*.wild.example", "profiles.p.allow"), rule("*.ports.example", "profiles.p.allow"),
      rule("web.example", "profiles.p.allow"),    rule("git.example", "profiles.p.allow")};
  p->deny = {rule("both-deny.example", "profiles.p.deny"),
             rule("a.deny.example:8443", "profiles.p.deny")};
  p->allow_cidrs = {cidr("10.0.0.0/8", "profiles.p.allow_cidrs"),
                    cidr("10.2.0.0/16", "profiles.p.allow_cidrs"),
                    cidr("127.0.0.0/8", "profiles.p.allow_cidrs")};
  p->deny_cidrs = {cidr("10.3.0.0/16", "profiles.p.deny_cidrs")};
  p->allow_host_services = {service("10.201.0.1", 8080, "profiles.p.allow_host_services")};
  p->inspect = {rule("inspected.example", "profiles.p.inspect")};
  p->inspect_addresses = {service("10.0.0.5", 443, "profiles.p.inspect")};
  p->opaque = {rule("ssh.example:443", "profiles.p.opaque")};
  p->http_rules = {
      http_rule("web.example", {"POST"}, "/admin/*", false, RuleMode::enforce,
                "profiles.p.http_rules[0]"),
      http_rule("web.example", {"DELETE"}, nullptr, false, RuleMode::audit,
                "profiles.p.http_rules[1]"),
  };
  p->git_rules = {git_rule("git.example/acme/*", true, false, "profiles.p.git[0]")};
  return p;
}

SandboxSpec sandbox_spec(std::shared_ptr<const RuleLists> profile) {
  SandboxSpec s;
  s.id = "sb";
  s.ports = {443, 8443};
  s.profile = std::move(profile);
  s.allow = {rule("both.example", "sandboxes.sb.allow"), rule("api.example", "sandboxes.sb.allow"),
             rule("exact.wild.example", "sandboxes.sb.allow"),
             rule("*.deny.example", "sandboxes.sb.allow")};
  s.deny = {rule("both-deny.example", "sandboxes.sb.deny"),
            rule("*.deny.example", "sandboxes.sb.deny")};
  s.allow_cidrs = {cidr("10.1.0.0/16", "sandboxes.sb.allow_cidrs"),
                   cidr("10.2.0.0/16", "sandboxes.sb.allow_cidrs"),
                   cidr("10.3.4.0/24", "sandboxes.sb.allow_cidrs")};
  s.deny_cidrs = {cidr("10.3.0.0/16", "sandboxes.sb.deny_cidrs"),
                  cidr("10.1.9.0/24", "sandboxes.sb.deny_cidrs")};
  s.allow_host_services = {service("10.201.0.1", 8080, "sandboxes.sb.allow_host_services"),
                           service("10.201.0.1", 9090, "sandboxes.sb.allow_host_services")};
  s.opaque = {rule("own-ssh.example:443", "sandboxes.sb.opaque")};
  s.allow.push_back(rule("own-ssh.example", "sandboxes.sb.allow"));
  s.allow.push_back(rule("ssh.example", "sandboxes.sb.allow"));
  s.http_rules = {
      http_rule("web.example", {}, nullptr, true, RuleMode::enforce, "sandboxes.sb.http_rules[0]"),
      http_rule("own-web.example", {"GET"}, "/ok", true, RuleMode::enforce,
                "sandboxes.sb.http_rules[1]"),
  };
  s.allow.push_back(rule("own-web.example", "sandboxes.sb.allow"));
  s.git_rules = {git_rule("git.example/acme/widget", true, true, "sandboxes.sb.git[0]")};
  return s;
}

const std::vector<Endpoint> kSelf = {{*parse_ip_literal("127.0.0.1"), 3128}};
const std::vector<Cidr> kPool = {*parse_cidr("10.201.0.0/16")};

void expect_same(const Decision& layered, const Decision& merged, const std::string& what) {
  EXPECT_EQ(layered.allowed, merged.allowed) << what;
  EXPECT_EQ(reason_name(layered.reason), reason_name(merged.reason)) << what;
  EXPECT_EQ(layered.rule, merged.rule) << what;
  EXPECT_EQ(layered.audit, merged.audit) << what;
  EXPECT_EQ(layered.refused_method, merged.refused_method) << what;
  EXPECT_EQ(layered.refused_path, merged.refused_path) << what;
  EXPECT_EQ(layered.git.op, merged.git.op) << what;
}

struct HostRow {
  const char* host;
  std::uint16_t port;
  EntryMode mode;
};

struct RequestRow {
  const char* host;
  const char* method;
  const char* target;
};

// Every question Policy answers, asked of `layered` and `flat`.
void expect_same_policy(const Policy& layered, const Policy& flat) {
  const HostRow hosts[] = {
      {"both.example", 443, EntryMode::connect},        // in both layers: the profile's rule
      {"api.example", 8443, EntryMode::connect},        // profile's pinned port, own's any
      {"api.example", 9000, EntryMode::connect},        // port_not_allowed names the first
      {"exact.wild.example", 443, EntryMode::connect},  // own exact before profile wildcard
      {"x.wild.example", 443, EntryMode::connect},
      {"a.b.ports.example", 8443, EntryMode::connect},
      {"both-deny.example", 443, EntryMode::connect},  // deny in both: the profile's
      {"a.deny.example", 8443, EntryMode::connect},    // profile exact deny before own wildcard
      {"a.deny.example", 443, EntryMode::connect},
      {"b.deny.example", 443, EntryMode::connect},
      {"a.deny.example", 0, EntryMode::dns},
      {"both.example", 0, EntryMode::dns},
      {"nowhere.example", 443, EntryMode::connect},
      {"ssh.example", 443, EntryMode::tcp},      // opaque in the profile
      {"own-ssh.example", 443, EntryMode::tcp},  // opaque in the sandbox
      {"both.example", 443, EntryMode::tcp},     // neither: unrecognized_protocol
      {"10.1.2.3", 443, EntryMode::connect},     // own range inside the profile's
      {"10.2.2.3", 443, EntryMode::connect},     // the same range in both: the profile's
      {"10.3.4.5", 443, EntryMode::connect},     // denied in both layers
      {"10.1.9.1", 443, EntryMode::connect},     // own deny inside own allow
      {"10.9.9.9", 8443, EntryMode::connect},    // profile's /8
      {"127.0.0.1", 443, EntryMode::connect},    // loopback opened by the profile
      {"127.0.0.1", 3128, EntryMode::connect},   // sandgate itself
      {"10.201.0.1", 8080, EntryMode::connect},  // host service in both: the profile's
      {"10.201.0.1", 9090, EntryMode::connect},  // own host service
      {"10.201.0.1", 443, EntryMode::connect},   // the pool
      {"[::ffff:10.2.0.1]", 443, EntryMode::connect},
      {"999.1", 443, EntryMode::connect},
  };
  const AddressSet no_live;
  for (const HostRow& row : hosts) {
    const std::string what = std::string(row.host) + ":" + std::to_string(row.port);
    const Host h = normalize_host(row.host);
    expect_same(layered.decide({"sb", row.host, row.port, row.mode}),
                flat.decide({"sb", row.host, row.port, row.mode}), what);
    EXPECT_EQ(layered.inspects("sb", h, row.port), flat.inspects("sb", h, row.port)) << what;
    if (h.is_address()) {
      expect_same(layered.check_address("sb", h.address, row.port, no_live),
                  flat.check_address("sb", h.address, row.port, no_live), what + " (address)");
    }
  }
  for (const char* inspected : {"inspected.example", "web.example", "git.example", "10.0.0.5"}) {
    const Host h = normalize_host(inspected);
    EXPECT_TRUE(layered.inspects("sb", h, 443)) << inspected;
    EXPECT_EQ(layered.inspects("sb", h, 443), flat.inspects("sb", h, 443)) << inspected;
  }

  const RequestRow requests[] = {
      {"web.example", "POST", "/admin/users"},  // the profile's deny before own allow
      {"web.example", "DELETE", "/x"},          // the profile's audit deny
      {"web.example", "GET", "/x"},             // own allow
      {"own-web.example", "GET", "/ok"},
      {"own-web.example", "GET", "/other"},  // no matching http rule: suggestion
      {"own-web.example", "GET", "/a%2Fb"},  // ambiguous
      {"git.example", "GET", "/acme/widget/info/refs?service=git-receive-pack"},  // profile first
      {"git.example", "POST", "/acme/widget/git-upload-pack"},
      {"git.example", "POST", "/other/x/git-upload-pack"},
      {"both.example", "GET", "/"},  // no rule names it
  };
  for (const RequestRow& row : requests) {
    const Host h = normalize_host(row.host);
    RequestFacts f;
    f.sandbox = "sb";
    f.host = &h;
    f.port = 443;
    f.method = row.method;
    f.path = row.target;
    expect_same(decide_request(layered, f), decide_request(flat, f),
                std::string(row.method) + " " + row.host + row.target);
  }
}

TEST(ProfileLayers, DecideAsTheMergedList) {
  const SandboxSpec spec = sandbox_spec(profile_lists());
  const Policy layered({spec}, kSelf, kPool);
  const Policy flat({merged(spec)}, kSelf, kPool);
  expect_same_policy(layered, flat);
  // Where both layers match, the profile's entry is the one named (as first in the list).
  const auto rule_of = [&](const char* host, std::uint16_t port) {
    return layered.decide({"sb", host, port, EntryMode::connect}).rule;
  };
  EXPECT_EQ(rule_of("both.example", 443), "profiles.p.allow:both.example");
  EXPECT_EQ(rule_of("both-deny.example", 443), "profiles.p.deny:both-deny.example");
  EXPECT_EQ(rule_of("exact.wild.example", 443), "sandboxes.sb.allow:exact.wild.example");
  EXPECT_EQ(rule_of("10.2.2.3", 443), "profiles.p.allow_cidrs:10.2.0.0/16");
  EXPECT_EQ(rule_of("10.1.2.3", 443), "sandboxes.sb.allow_cidrs:10.1.0.0/16");
  EXPECT_EQ(rule_of("10.201.0.1", 8080), "profiles.p.allow_host_services:10.201.0.1:8080");
}

TEST(ProfileLayers, MergedPutsTheProfileFirst) {
  const SandboxSpec spec = merged(sandbox_spec(profile_lists()));
  EXPECT_EQ(spec.profile, nullptr);
  ASSERT_EQ(spec.allow.size(), 13u);
  EXPECT_EQ(spec.allow[0].origin, "profiles.p.allow");
  EXPECT_EQ(spec.allow[6].origin, "sandboxes.sb.allow");
  ASSERT_EQ(spec.http_rules.size(), 4u);
  EXPECT_EQ(spec.http_rules[2].origin, "sandboxes.sb.http_rules[0]");
}

TEST(ProfileLayers, IncrementalPolicyDecidesAsAFreshOne) {
  const auto profile = profile_lists();
  SandboxSpec other = sandbox_spec(profile);
  other.id = "other";
  SandboxSpec gone = sandbox_spec(profile);
  gone.id = "gone";
  const Policy before({other, gone}, kSelf, kPool);
  const Policy after(before, {"gone"}, {sandbox_spec(profile)});
  EXPECT_TRUE(after.has_sandbox("sb"));
  EXPECT_TRUE(after.has_sandbox("other"));
  EXPECT_FALSE(after.has_sandbox("gone"));
  EXPECT_TRUE(before.has_sandbox("gone"));  // the previous policy is left as it was
  EXPECT_FALSE(before.has_sandbox("sb"));
  EXPECT_EQ(after.sandbox_count(), 2u);
  expect_same_policy(after, Policy({merged(sandbox_spec(profile))}, kSelf, kPool));
}

TEST(ProfileLayers, IncrementalPolicyReplacesASandboxOfTheSameId) {
  const auto profile = profile_lists();
  SandboxSpec first = sandbox_spec(profile);
  first.allow_all_hosts = true;
  const Policy before({first}, kSelf, kPool);
  EXPECT_TRUE(before.decide({"sb", "nowhere.example", 443, EntryMode::connect}).allowed);
  const Policy after(before, {}, {sandbox_spec(profile)});
  EXPECT_EQ(after.sandbox_count(), 1u);
  EXPECT_FALSE(after.decide({"sb", "nowhere.example", 443, EntryMode::connect}).allowed);
}

// The sandbox's ports replace the profile's for the profile's rules too.
TEST(ProfileLayers, ProfileRulesTakeEachSandboxsPorts) {
  const auto profile = profile_lists();
  SandboxSpec a = sandbox_spec(profile);
  a.id = "a";
  a.ports = {443};
  SandboxSpec b = sandbox_spec(profile);
  b.id = "b";
  b.ports = {8443};
  const Policy p({a, b}, kSelf, kPool);
  EXPECT_TRUE(p.decide({"a", "x.wild.example", 443, EntryMode::connect}).allowed);
  EXPECT_FALSE(p.decide({"a", "x.wild.example", 8443, EntryMode::connect}).allowed);
  EXPECT_FALSE(p.decide({"b", "x.wild.example", 443, EntryMode::connect}).allowed);
  EXPECT_TRUE(p.decide({"b", "x.wild.example", 8443, EntryMode::connect}).allowed);
  EXPECT_TRUE(p.inspects("a", normalize_host("inspected.example"), 443));
  EXPECT_FALSE(p.inspects("b", normalize_host("inspected.example"), 443));
}

}  // namespace
}  // namespace sandgate::policy
