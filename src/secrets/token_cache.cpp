#include "secrets/token_cache.hpp"

#include <algorithm>
#include <cmath>

namespace sandgate::secrets {

std::chrono::milliseconds backoff_delay(const BackoffPolicy& policy, std::uint32_t failures,
                                        double unit_random) {
  using std::chrono::milliseconds;
  const std::int64_t initial = std::max<std::int64_t>(policy.initial.count(), 1);
  const std::int64_t max = std::max<std::int64_t>(policy.max.count(), initial);
  std::int64_t delay = initial;
  for (std::uint32_t i = 1; i < failures && delay < max; ++i) delay *= 2;
  delay = std::min(delay, max);
  const double r = std::clamp(unit_random, 0.0, 1.0);
  const auto half = delay / 2;
  const auto jitter = static_cast<std::int64_t>(std::floor(static_cast<double>(delay - half) * r));
  return milliseconds(half + jitter);
}

TimePoint refresh_time(TimePoint obtained, TimePoint expires, std::chrono::seconds before) {
  if (expires == TimePoint::max()) return TimePoint::max();
  if (expires <= obtained) return obtained;
  const TimePoint ahead = expires - before;
  const TimePoint half_life = obtained + (expires - obtained) / 2;
  return std::max(ahead, half_life);
}

RefreshState::Action RefreshState::on_request(TimePoint now) {
  if (is_usable(token_.get(), now)) {
    if (now < token_->refresh_at || in_flight_ || now < retry_at_) return Action::serve;
    in_flight_ = true;
    return Action::serve_and_refresh;
  }
  if (in_flight_) return Action::wait;
  if (failures_ > 0 && now < retry_at_) return Action::fail;
  in_flight_ = true;
  return Action::refresh_and_wait;
}

void RefreshState::on_success(std::shared_ptr<const Token> token) {
  token_ = std::move(token);
  in_flight_ = false;
  failures_ = 0;
  retry_at_ = {};
  last_error_.reset();
}

void RefreshState::on_failure(TimePoint now, TokenError error, double unit_random) {
  in_flight_ = false;
  if (failures_ < UINT32_MAX) ++failures_;
  const auto delay = backoff_delay(backoff_, failures_, unit_random);
  retry_at_ = now + std::chrono::duration_cast<TimePoint::duration>(delay);
  last_error_ = std::move(error);
}

std::shared_ptr<const Token> RefreshState::usable(TimePoint now) const {
  return is_usable(token_.get(), now) ? token_ : nullptr;
}

}  // namespace sandgate::secrets
