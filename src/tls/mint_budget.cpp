#include "tls/mint_budget.hpp"

#include <algorithm>
#include <iterator>
#include <stdexcept>

namespace sandgate::tls {

MintBudget::MintBudget(std::size_t per_minute, Clock clock)
    : capacity_(static_cast<double>(per_minute)),
      per_second_(static_cast<double>(per_minute) / 60.0),
      clock_(std::move(clock)) {
  if (per_minute == 0) throw std::invalid_argument("leaf mint budget must be at least 1");
}

void MintBudget::refill(Bucket& b, std::chrono::steady_clock::time_point now) const {
  const std::chrono::duration<double> elapsed = now - b.updated;
  if (elapsed.count() > 0) {
    b.tokens = std::min(capacity_, b.tokens + elapsed.count() * per_second_);
    b.updated = now;
  }
}

bool MintBudget::take(std::string_view sandbox) {
  const auto now = clock_();
  const std::lock_guard lock(mutex_);
  auto it = buckets_.find(std::string(sandbox));
  if (it == buckets_.end()) {
    if (buckets_.size() >= prune_at_) {
      // A full bucket holds nothing worth keeping: forget it. What is left are sandboxes
      // that minted lately, at most the configured sandboxes.
      for (auto entry = buckets_.begin(); entry != buckets_.end();) {
        refill(entry->second, now);
        entry = entry->second.tokens >= capacity_ ? buckets_.erase(entry) : std::next(entry);
      }
      prune_at_ = std::max<std::size_t>(1024, buckets_.size() * 2);
    }
    it = buckets_.emplace(std::string(sandbox), Bucket{capacity_, now}).first;
  }
  Bucket& b = it->second;
  refill(b, now);
  if (b.tokens < 1.0) return false;
  b.tokens -= 1.0;
  return true;
}

std::size_t MintBudget::buckets() const {
  const std::lock_guard lock(mutex_);
  return buckets_.size();
}

}  // namespace sandgate::tls
