// Cost of one policy decision as the number of rules grows. Policy promises that a decision
// does not get slower with more rules (hash lookups by exact name, by each parent suffix, and
// by CIDR prefix length), so each benchmark runs with N = 10, 1000 and 100000 rules and the
// three rows should read about the same.
//
//   ./build/dev/bench/policy_bench --benchmark_time_unit=ns
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "decide_loop.hpp"
#include "policy/host_pattern.hpp"
#include "policy/ip_address.hpp"
#include "policy/path.hpp"
#include "policy/policy.hpp"
#include "policy/request.hpp"

namespace {

using sandgate::policy::CidrSource;
using sandgate::policy::Decision;
using sandgate::policy::EntryMode;
using sandgate::policy::IpAddress;
using sandgate::policy::Policy;
using sandgate::policy::Query;
using sandgate::policy::RuleSource;
using sandgate::policy::SandboxSpec;

constexpr const char* kSandbox = "bench";

// Rule i's label suffix, zero-padded so that every N benchmarks names of the same length.
std::string label(std::int64_t i) {
  std::string digits = std::to_string(i);
  return std::string(6 - std::min<std::size_t>(6, digits.size()), '0') + digits;
}

RuleSource rule(const std::string& text, const char* origin) {
  return {*sandgate::policy::parse_host_pattern(text), origin};
}
CidrSource cidr(const std::string& text, const char* origin) {
  return {*sandgate::policy::parse_cidr(text), origin};
}

// A sandbox with n host rules: n/2 exact names "hostI.zoneI.example", n/2 wildcards
// "*.zoneI.example" (I = 000000, 000001, ...), n/100 + 1 deny rules and n/2 + 1
// allow_cidrs (single addresses in 172.16/12 plus 10.0.0.0/8), next to a few other sandboxes.
// Built once per n and kept for the whole run, outside every timed loop.
const Policy& policy_with(std::int64_t n) {
  static std::map<std::int64_t, std::unique_ptr<const Policy>> cache;
  auto& slot = cache[n];
  if (slot) return *slot;

  SandboxSpec sb;
  sb.id = kSandbox;
  for (std::int64_t i = 0; i < n / 2; ++i) {
    const std::string zone = "zone" + label(i) + ".example";
    sb.allow.push_back(rule("host" + label(i) + "." + zone, "sandboxes.bench.allow"));
    sb.allow.push_back(rule("*." + zone, "sandboxes.bench.allow"));
  }
  for (std::int64_t i = 0; i <= n / 100; ++i) {
    sb.deny.push_back(rule("blocked" + label(i) + ".example", "sandboxes.bench.deny"));
  }
  sb.allow_cidrs.push_back(cidr("10.0.0.0/8", "sandboxes.bench.allow_cidrs"));
  for (std::int64_t i = 0; i < n / 2; ++i) {
    const auto v = static_cast<std::uint32_t>(i);
    sb.allow_cidrs.push_back(cidr("172." + std::to_string(16 + ((v >> 16) & 0x0f)) + "." +
                                      std::to_string((v >> 8) & 0xff) + "." +
                                      std::to_string(v & 0xff),
                                  "sandboxes.bench.allow_cidrs"));
  }
  sb.deny_cidrs.push_back(cidr("10.9.0.0/16", "sandboxes.bench.deny_cidrs"));

  std::vector<SandboxSpec> sandboxes{sb};
  for (int i = 0; i < 8; ++i) {
    SandboxSpec other;
    other.id = "other" + std::to_string(i);
    other.allow.push_back(rule("github.com", "profiles.default.allow"));
    sandboxes.push_back(std::move(other));
  }
  const std::vector<sandgate::policy::Endpoint> self{
      {*sandgate::policy::parse_ip_literal("127.0.0.1"), 3128}};
  slot = std::make_unique<const Policy>(std::move(sandboxes), self);
  return *slot;
}

// Runs decide() on one host and checks, once, that it came out as the benchmark claims.
void run_decide(benchmark::State& state, const std::string& host, bool want_allowed) {
  sandgate::bench::run_decide(state, policy_with(state.range(0)),
                              Query{kSandbox, host, 443, EntryMode::connect}, want_allowed);
}

// An exact rule in the middle of the table.
void BM_DecideExactHit(benchmark::State& state) {
  const std::int64_t i = state.range(0) / 4;
  run_decide(state, "host" + label(i) + ".zone" + label(i) + ".example", true);
}

// A wildcard found after four parent-suffix probes.
void BM_DecideDeepWildcardHit(benchmark::State& state) {
  run_decide(state, "a.b.c.d.zone" + label(state.range(0) / 4) + ".example", true);
}

// No rule matches: every suffix is probed and misses.
void BM_DecideMiss(benchmark::State& state) {
  run_decide(state, "a.b.c.d.nowhere.example", false);
}

// An IP literal inside allow_cidrs (classification, deny_cidrs, allow_cidrs, port).
void BM_DecideIpLiteralAllowCidr(benchmark::State& state) {
  run_decide(state, "10.1.2.3", true);
}

// One resolved (public) address of an allowed name, as the proxy checks it before dialling,
// against a host with a few hundred interface addresses (a busy launcher host).
void BM_CheckAddressResolved(benchmark::State& state) {
  const Policy& policy = policy_with(state.range(0));
  const IpAddress address = *sandgate::policy::parse_ip_literal("140.82.112.3");
  std::vector<IpAddress> interfaces;
  for (std::uint32_t i = 0; i < 512; ++i) {
    interfaces.push_back(IpAddress::v4(0x0AC90001u + 4 * i));  // 10.201.x.y host sides
  }
  const sandgate::policy::AddressSet host(std::move(interfaces));
  if (!policy.check_address(kSandbox, address, 443, host).allowed) {
    state.SkipWithError("unexpected decision for 140.82.112.3");
    return;
  }
  for (auto _ : state) {
    Decision d = policy.check_address(kSandbox, address, 443, host);
    benchmark::DoNotOptimize(d);
  }
}

// A sandbox with 20 http rules for one host (methods and path globs), next to n host rules:
// the request matches the last rule, so every rule naming the host is tried.
const Policy& policy_with_http_rules(std::int64_t n) {
  static std::map<std::int64_t, std::unique_ptr<const Policy>> cache;
  auto& slot = cache[n];
  if (slot) return *slot;
  SandboxSpec sb;
  sb.id = kSandbox;
  for (std::int64_t i = 0; i < n; ++i) {
    sb.allow.push_back(rule("host" + label(i) + ".example", "sandboxes.bench.allow"));
    sb.inspect.push_back(rule("inspected" + label(i) + ".example", "sandboxes.bench.inspect"));
  }
  sb.allow.push_back(rule("api.example.com", "sandboxes.bench.allow"));
  for (int i = 0; i < 20; ++i) {
    sandgate::policy::HttpRule r;
    r.hosts = {*sandgate::policy::parse_host_pattern("api.example.com")};
    r.methods = {i + 1 == 20 ? "GET" : "POST"};
    r.paths = {*sandgate::policy::PathGlob::parse("/repos/team" + std::to_string(i) + "/**"),
               *sandgate::policy::PathGlob::parse("/repos/*/issues/*/comments")};
    r.allow = true;
    r.origin = "sandboxes.bench.http_rules[" + std::to_string(i) + "]";
    sb.http_rules.push_back(std::move(r));
  }
  slot = std::make_unique<const Policy>(std::vector<SandboxSpec>{sb},
                                        std::vector<sandgate::policy::Endpoint>{});
  return *slot;
}

// decide_request: host rules, canonicalisation, then 20 http rules on the host.
void BM_DecideRequest20HttpRules(benchmark::State& state) {
  const Policy& policy = policy_with_http_rules(state.range(0));
  const sandgate::policy::Host host = sandgate::policy::normalize_host("api.example.com");
  sandgate::policy::RequestFacts facts;
  facts.sandbox = kSandbox;
  facts.host = &host;
  facts.port = 443;
  facts.method = "GET";
  facts.path = "/repos/team19/widget/pulls/%31?per_page=100";
  const Decision first = sandgate::policy::decide_request(policy, facts);
  if (!first.allowed || first.rule != "sandboxes.bench.http_rules[19]") {
    state.SkipWithError("unexpected decision for the request");
    return;
  }
  for (auto _ : state) {
    Decision d = sandgate::policy::decide_request(policy, facts);
    benchmark::DoNotOptimize(d);
  }
}

// Policy::inspects for a host no pattern names, next to n inspect patterns.
void BM_InspectsMiss(benchmark::State& state) {
  const Policy& policy = policy_with_http_rules(state.range(0));
  const sandgate::policy::Host host = sandgate::policy::normalize_host("a.b.host000001.example");
  if (policy.inspects(kSandbox, host, 443)) {
    state.SkipWithError("unexpected inspection");
    return;
  }
  for (auto _ : state) {
    bool inspected = policy.inspects(kSandbox, host, 443);
    benchmark::DoNotOptimize(inspected);
  }
}

BENCHMARK(BM_DecideRequest20HttpRules)->Arg(10)->Arg(1000)->Arg(100000);
BENCHMARK(BM_InspectsMiss)->Arg(10)->Arg(1000)->Arg(100000);

BENCHMARK(BM_DecideExactHit)->Arg(10)->Arg(1000)->Arg(100000);
BENCHMARK(BM_DecideDeepWildcardHit)->Arg(10)->Arg(1000)->Arg(100000);
BENCHMARK(BM_DecideMiss)->Arg(10)->Arg(1000)->Arg(100000);
BENCHMARK(BM_DecideIpLiteralAllowCidr)->Arg(10)->Arg(1000)->Arg(100000);
BENCHMARK(BM_CheckAddressResolved)->Arg(10)->Arg(1000)->Arg(100000);

}  // namespace
