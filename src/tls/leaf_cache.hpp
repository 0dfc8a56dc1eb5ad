#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <future>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

#include "common/errc.hpp"
#include "tls/authority.hpp"
#include "tls/leaf.hpp"

namespace sandgate::tls {

// Counters a metrics layer reads (relaxed atomics; each is monotonic except `size`).
struct LeafCacheStats {
  std::uint64_t hits = 0;           // a fresh cached leaf was returned
  std::uint64_t misses = 0;         // no fresh leaf: the caller minted or waited for a mint
  std::uint64_t mints = 0;          // mints started (misses minus callers that joined one)
  std::uint64_t mint_failures = 0;  // mints that returned an error (not cached)
  std::uint64_t mints_refused = 0;  // mints may_mint refused (a sandbox over its budget)
  std::uint64_t evictions = 0;      // least recently used leaves dropped for capacity
  std::size_t size = 0;             // leaves cached now
};

struct LeafCacheOptions {
  std::size_t capacity = 1024;  // leaves kept; at least 1
  // A cached leaf with less than this left before notAfter is minted again. Must be shorter
  // than the leaves' validity, or every call mints.
  std::chrono::seconds renew_before = std::chrono::hours(12);
  // Where "now" comes from; tests move it forward instead of waiting.
  std::function<std::chrono::system_clock::time_point()> clock = [] {
    return std::chrono::system_clock::now();
  };
};

// The leaves of every intercepted name, shared by all worker threads (one instance per daemon,
// held by shared_ptr). get() returns the cached leaf, or mints one: for each name at most one
// mint runs at a time (single flight: callers for that name wait for its result, callers for
// other names are not held up, since minting happens outside the lock). Bounded: beyond
// `capacity` the least recently used leaf is dropped (connections holding it keep it alive).
// A failed mint is not cached; its waiters get the same error and the next call tries again.
// get() blocks its thread while a mint runs (a few milliseconds); the proxy calls it from a
// thread where that is acceptable, or moves it off the io_context later.
class LeafCache {
 public:
  using Minter = std::function<Result<std::shared_ptr<const Leaf>>(std::string_view name)>;

  LeafCache(Minter minter, LeafCacheOptions options = {});
  // Mints with `authority` and `leaf` options; throws std::invalid_argument when
  // options.renew_before is not shorter than leaf.validity.
  LeafCache(std::shared_ptr<const Authority> authority, LeafOptions leaf,
            LeafCacheOptions options = {});

  // `name` is the cache key as given: the caller passes the name policy normalised.
  // `may_mint`, when given, is asked once before this caller would start a mint (not for a
  // cached leaf, nor for joining a mint in flight); false makes get() return
  // Errc::too_many_leaf_mints without minting.
  Result<std::shared_ptr<const Leaf>> get(std::string_view name,
                                          const std::function<bool()>& may_mint = {});

  LeafCacheStats stats() const;

 private:
  using Shared = std::shared_future<Result<std::shared_ptr<const Leaf>>>;
  struct Entry {
    std::shared_ptr<const Leaf> leaf;
    std::list<std::string>::iterator lru;  // position in lru_
  };

  // Caller holds mutex_.
  void store(const std::string& name, std::shared_ptr<const Leaf> leaf);

  Minter minter_;
  LeafCacheOptions options_;

  mutable std::mutex mutex_;
  std::unordered_map<std::string, Entry> entries_;
  std::list<std::string> lru_;  // most recently used first
  std::unordered_map<std::string, Shared> in_flight_;

  std::atomic<std::uint64_t> hits_{0}, misses_{0}, mints_{0}, mint_failures_{0}, mints_refused_{0},
      evictions_{0};
  std::atomic<std::size_t> size_{0};
};

}  // namespace sandgate::tls
