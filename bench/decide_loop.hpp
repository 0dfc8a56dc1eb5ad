#pragma once

#include <benchmark/benchmark.h>

#include <string>

#include "policy/policy.hpp"

namespace sandgate::bench {

// Runs policy.decide(query) in the benchmark's loop after checking, once, that it comes out
// as the benchmark claims (allowed or not): a benchmark that measures the wrong path says so.
inline void run_decide(benchmark::State& state, const policy::Policy& policy,
                       const policy::Query& query, bool want_allowed) {
  if (policy.decide(query).allowed != want_allowed) {
    state.SkipWithError(("unexpected decision for " + std::string(query.host)).c_str());
    return;
  }
  for (auto _ : state) {
    policy::Decision d = policy.decide(query);
    benchmark::DoNotOptimize(d);
  }
}

}  // namespace sandgate::bench
