// Cost of one policy decision as the number of sandboxes grows (issue 13, item 5): N sandboxes
// that all use one profile of R host rules, read from config text the way the daemon reads
// them (config::load_config_from_string, Config::build_policy). Each benchmark runs with
// N = 10, 1000 and 10000 and R = 20 and 200; the rows should read about the same.
//
//   ./build/release/bench/scale_decide_bench --benchmark_time_unit=ns
#include <benchmark/benchmark.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include "config/config.hpp"
#include "decide_loop.hpp"
#include "policy/policy.hpp"

namespace {

using sandgate::policy::EntryMode;
using sandgate::policy::Policy;
using sandgate::policy::Query;

// The profile's rule i: even i an exact name, odd i a wildcard over its own zone.
std::string rule_text(std::int64_t i) {
  const std::string zone = "zone" + std::to_string(i) + ".example";
  return i % 2 == 0 ? "host." + zone : "*." + zone;
}

std::string config_text(std::int64_t sandboxes, std::int64_t rules) {
  std::string text = "sandboxes_dir = \"\"\n[profiles.p]\nallow = [";
  for (std::int64_t i = 0; i < rules; ++i) text += "\"" + rule_text(i) + "\",";
  text += "]\ndeny = [\"blocked.example\"]\n";
  for (std::int64_t i = 0; i < sandboxes; ++i) {
    text += "[sandboxes.sb" + std::to_string(i) + "]\nprofile = \"p\"\ntoken = \"t\"\n";
  }
  return text;
}

// Built once per (N, R) and kept for the whole run, outside every timed loop.
const Policy& policy_with(std::int64_t sandboxes, std::int64_t rules) {
  static std::map<std::pair<std::int64_t, std::int64_t>, std::shared_ptr<const Policy>> cache;
  auto& slot = cache[{sandboxes, rules}];
  if (!slot) {
    slot = sandgate::config::load_config_from_string(config_text(sandboxes, rules), "scale.toml")
               .build_policy();
  }
  return *slot;
}

void run_decide(benchmark::State& state, const std::string& host, bool want_allowed) {
  const std::string sandbox = "sb" + std::to_string(state.range(0) / 2);
  sandgate::bench::run_decide(state, policy_with(state.range(0), state.range(1)),
                              Query{sandbox, host, 443, EntryMode::connect}, want_allowed);
}

// An exact rule of the profile.
void BM_DecideProfileExact(benchmark::State& state) {
  run_decide(state, "host.zone" + std::to_string(state.range(1) / 2 & ~1) + ".example", true);
}

// A wildcard rule of the profile, two labels below it.
void BM_DecideProfileWildcard(benchmark::State& state) {
  run_decide(state, "a.b.zone" + std::to_string(state.range(1) / 2 | 1) + ".example", true);
}

// The profile's deny rule.
void BM_DecideProfileDeny(benchmark::State& state) {
  run_decide(state, "blocked.example", false);
}

// No rule matches.
void BM_DecideMiss(benchmark::State& state) {
  run_decide(state, "a.b.nowhere.example", false);
}

void sizes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"sandboxes", "rules"});
  for (const std::int64_t rules : {20, 200}) {
    for (const std::int64_t n : {10, 1000, 10000}) b->Args({n, rules});
  }
}

BENCHMARK(BM_DecideProfileExact)->Apply(sizes);
BENCHMARK(BM_DecideProfileWildcard)->Apply(sizes);
BENCHMARK(BM_DecideProfileDeny)->Apply(sizes);
BENCHMARK(BM_DecideMiss)->Apply(sizes);

}  // namespace
