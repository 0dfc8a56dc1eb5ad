#include "tls/leaf_cache.hpp"

#include <stdexcept>

namespace sandgate::tls {

namespace {
constexpr auto kRelaxed = std::memory_order_relaxed;
}

LeafCache::LeafCache(Minter minter, LeafCacheOptions options)
    : minter_(std::move(minter)), options_(std::move(options)) {
  if (options_.capacity == 0) throw std::invalid_argument("leaf cache capacity must be at least 1");
  if (!options_.clock) throw std::invalid_argument("leaf cache needs a clock");
}

LeafCache::LeafCache(std::shared_ptr<const Authority> authority, LeafOptions leaf,
                     LeafCacheOptions options)
    : LeafCache([authority = std::move(authority),
                 leaf](std::string_view name) { return authority->mint(name, leaf); },
                std::move(options)) {
  if (options_.renew_before >= leaf.validity) {
    throw std::invalid_argument("leaf renew_before must be shorter than the leaf validity");
  }
}

Result<std::shared_ptr<const Leaf>> LeafCache::get(std::string_view name,
                                                   const std::function<bool()>& may_mint) {
  const auto now = options_.clock();
  std::string key(name);
  std::promise<Result<std::shared_ptr<const Leaf>>> promise;
  {
    std::unique_lock lock(mutex_);
    if (const auto it = entries_.find(key); it != entries_.end()) {
      if (now + options_.renew_before < it->second.leaf->not_after()) {
        lru_.splice(lru_.begin(), lru_, it->second.lru);
        hits_.fetch_add(1, kRelaxed);
        return it->second.leaf;
      }
    }
    misses_.fetch_add(1, kRelaxed);
    if (const auto it = in_flight_.find(key); it != in_flight_.end()) {
      Shared pending = it->second;
      lock.unlock();
      return pending.get();
    }
    if (may_mint && !may_mint()) {
      mints_refused_.fetch_add(1, kRelaxed);
      return make_error_code(Errc::too_many_leaf_mints);
    }
    in_flight_.emplace(key, promise.get_future().share());
    mints_.fetch_add(1, kRelaxed);
  }

  // Outside the lock: other names go ahead, callers for this one wait on the future.
  Result<std::shared_ptr<const Leaf>> result = make_error_code(Errc::internal_error);
  try {
    result = minter_(key);
  } catch (...) {
    const std::lock_guard lock(mutex_);
    in_flight_.erase(key);
    mint_failures_.fetch_add(1, kRelaxed);
    promise.set_exception(std::current_exception());
    throw;
  }
  {
    const std::lock_guard lock(mutex_);
    in_flight_.erase(key);
    if (result && *result) {
      store(key, *result);
    } else {
      mint_failures_.fetch_add(1, kRelaxed);
      if (result && !*result) result = make_error_code(Errc::internal_error);
    }
  }
  promise.set_value(result);
  return result;
}

void LeafCache::store(const std::string& name, std::shared_ptr<const Leaf> leaf) {
  if (const auto it = entries_.find(name); it != entries_.end()) {
    it->second.leaf = std::move(leaf);  // a renewal replaces the stale leaf
    lru_.splice(lru_.begin(), lru_, it->second.lru);
    return;
  }
  lru_.push_front(name);
  entries_.emplace(name, Entry{std::move(leaf), lru_.begin()});
  while (entries_.size() > options_.capacity) {
    entries_.erase(lru_.back());
    lru_.pop_back();
    evictions_.fetch_add(1, kRelaxed);
  }
  size_.store(entries_.size(), kRelaxed);
}

LeafCacheStats LeafCache::stats() const {
  return {hits_.load(kRelaxed),          misses_.load(kRelaxed),        mints_.load(kRelaxed),
          mint_failures_.load(kRelaxed), mints_refused_.load(kRelaxed), evictions_.load(kRelaxed),
          size_.load(kRelaxed)};
}

}  // namespace sandgate::tls
