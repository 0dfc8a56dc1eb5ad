#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

namespace sandgate::tls {

// How many leaves each sandbox may make sandgate mint (THREATS 24: a sandbox cycling through
// the names an inspect wildcard allows would make the proxy mint, and evict, without end).
// A token bucket per sandbox: `per_minute` mints, refilled evenly, with a burst of the same
// size. Only a mint takes from it: a cached leaf, or joining a mint in flight, is free.
// Shared by every worker (one mutex; taken once per mint, which costs far more).
class MintBudget {
 public:
  using Clock = std::function<std::chrono::steady_clock::time_point()>;

  explicit MintBudget(
      std::size_t per_minute, Clock clock = [] { return std::chrono::steady_clock::now(); });

  // Takes one mint from `sandbox`'s bucket; false when it is empty.
  bool take(std::string_view sandbox);

  // Buckets held now (full buckets of sandboxes gone quiet are dropped as the map grows).
  std::size_t buckets() const;

 private:
  struct Bucket {
    double tokens;
    std::chrono::steady_clock::time_point updated;
  };
  // Refills `b` up to now; caller holds mutex_.
  void refill(Bucket& b, std::chrono::steady_clock::time_point now) const;

  double capacity_;
  double per_second_;
  Clock clock_;
  mutable std::mutex mutex_;
  std::unordered_map<std::string, Bucket> buckets_;
  std::size_t prune_at_ = 1024;
};

}  // namespace sandgate::tls
