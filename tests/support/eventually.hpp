#pragma once

#include <chrono>
#include <thread>

namespace sandgate::test {

// Polls `condition` every `step` until it holds or `timeout` passes; returns whether it held.
// For waiting on an effect a test cannot be told of directly (bytes reaching an origin, a
// gauge returning to zero), instead of sleeping for a fixed time.
template <class Condition>
bool eventually(Condition condition,
                std::chrono::milliseconds timeout = std::chrono::milliseconds(3000),
                std::chrono::milliseconds step = std::chrono::milliseconds(10)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (condition()) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(step);
  }
}

}  // namespace sandgate::test
