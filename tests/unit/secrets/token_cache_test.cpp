#include "secrets/token_cache.hpp"

#include <gtest/gtest.h>

namespace sandgate::secrets {
namespace {

using namespace std::chrono_literals;
using Action = RefreshState::Action;

const TimePoint kT0 = TimePoint() + std::chrono::hours(24 * 365 * 50);

std::shared_ptr<const Token> token(std::string value, TimePoint refresh_at, TimePoint expires_at) {
  auto t = std::make_shared<Token>();
  t->value = SecretBytes(value);
  t->refresh_at = refresh_at;
  t->expires_at = expires_at;
  return t;
}

TEST(Backoff, DoublesFromInitialToCapWithJitterInTheUpperHalf) {
  const BackoffPolicy p{1'000ms, 300'000ms};
  struct Row {
    std::uint32_t failures;
    double r;
    std::chrono::milliseconds want;
  };
  for (const Row& row :
       {Row{1, 0.0, 500ms}, Row{1, 0.999, 999ms}, Row{2, 0.0, 1'000ms}, Row{3, 0.5, 3'000ms},
        Row{9, 0.0, 128'000ms}, Row{10, 0.0, 150'000ms}, Row{10, 0.9999, 299'985ms},
        Row{1000, 0.0, 150'000ms}, Row{UINT32_MAX, 1.0, 300'000ms}}) {
    EXPECT_EQ(backoff_delay(p, row.failures, row.r), row.want)
        << row.failures << " failures, r=" << row.r;
  }
}

TEST(RefreshTime, AheadOfExpiryButNotBeforeHalfLife) {
  EXPECT_EQ(refresh_time(kT0, kT0 + 1h, 600s), kT0 + 50min);
  EXPECT_EQ(refresh_time(kT0, kT0 + 5min, 600s), kT0 + 150s);  // short-lived: half-life
  EXPECT_EQ(refresh_time(kT0, kT0 + 1h, 0s), kT0 + 1h);
  EXPECT_EQ(refresh_time(kT0, TimePoint::max(), 600s), TimePoint::max());
  EXPECT_EQ(refresh_time(kT0, kT0 - 1s, 600s), kT0);  // already expired: now
}

TEST(RefreshState, FirstRequestStartsOneRefreshOthersWait) {
  RefreshState s;
  EXPECT_EQ(s.on_request(kT0), Action::refresh_and_wait);
  EXPECT_TRUE(s.refreshing());
  for (int i = 0; i < 100; ++i) EXPECT_EQ(s.on_request(kT0), Action::wait);
  s.on_success(token("a", kT0 + 50min, kT0 + 1h));
  EXPECT_FALSE(s.refreshing());
  EXPECT_EQ(s.on_request(kT0 + 1s), Action::serve);
  EXPECT_EQ(s.usable(kT0 + 1s)->value.view(), "a");
}

TEST(RefreshState, RefreshesAheadOnceAndKeepsServing) {
  RefreshState s;
  ASSERT_EQ(s.on_request(kT0), Action::refresh_and_wait);
  s.on_success(token("a", kT0 + 50min, kT0 + 1h));
  EXPECT_EQ(s.on_request(kT0 + 49min), Action::serve);
  EXPECT_EQ(s.on_request(kT0 + 50min), Action::serve_and_refresh);
  EXPECT_EQ(s.on_request(kT0 + 51min), Action::serve);  // one in flight already
  s.on_success(token("b", kT0 + 101min, kT0 + 111min));
  EXPECT_EQ(s.on_request(kT0 + 52min), Action::serve);
  EXPECT_EQ(s.usable(kT0 + 52min)->value.view(), "b");
}

TEST(RefreshState, FailuresBackOffAndTheCachedTokenIsServedUntilItReallyExpires) {
  RefreshState s({1'000ms, 300'000ms});
  ASSERT_EQ(s.on_request(kT0), Action::refresh_and_wait);
  s.on_success(token("a", kT0 + 50min, kT0 + 1h));
  TimePoint now = kT0 + 50min;
  ASSERT_EQ(s.on_request(now), Action::serve_and_refresh);
  s.on_failure(now, {true, "endpoint down"}, 0.0);  // retry in 500 ms
  EXPECT_EQ(s.failures(), 1u);
  EXPECT_EQ(s.retry_at(), now + 500ms);
  EXPECT_EQ(s.on_request(now + 100ms), Action::serve);  // in backoff: no new refresh
  EXPECT_EQ(s.on_request(now + 500ms), Action::serve_and_refresh);
  s.on_failure(now + 500ms, {true, "endpoint down"}, 0.0);  // 1 s
  EXPECT_EQ(s.retry_at(), now + 1500ms);
  EXPECT_EQ(s.on_request(now + 1s), Action::serve);
  // Still failing at expiry: no token any more; in backoff the error comes at once.
  now = kT0 + 1h;
  EXPECT_EQ(s.usable(now), nullptr);
  EXPECT_EQ(s.on_request(now), Action::refresh_and_wait);
  s.on_failure(now, {true, "endpoint down"}, 0.0);  // 2 s
  EXPECT_EQ(s.on_request(now + 1s), Action::fail);
  ASSERT_TRUE(s.last_error());
  EXPECT_EQ(s.last_error()->message, "endpoint down");
  EXPECT_TRUE(s.last_error()->retryable);
  EXPECT_EQ(s.on_request(now + 2s), Action::refresh_and_wait);
  s.on_success(token("b", now + 1h, now + 2h));
  EXPECT_EQ(s.failures(), 0u);
  EXPECT_FALSE(s.last_error());
  EXPECT_EQ(s.on_request(now + 3s), Action::serve);
}

TEST(RefreshState, NonRetryableErrorsAreKeptForTheAnswer) {
  RefreshState s;
  ASSERT_EQ(s.on_request(kT0), Action::refresh_and_wait);
  s.on_failure(kT0, {false, "401 Bad credentials"}, 0.5);
  EXPECT_EQ(s.on_request(kT0 + 1ms), Action::fail);
  EXPECT_FALSE(s.last_error()->retryable);
}

TEST(RefreshState, NeverExpiringTokenIsAlwaysFresh) {
  RefreshState s;
  ASSERT_EQ(s.on_request(kT0), Action::refresh_and_wait);
  s.on_success(token("static", TimePoint::max(), TimePoint::max()));
  EXPECT_EQ(s.on_request(kT0 + std::chrono::hours(24 * 365)), Action::serve);
}

TEST(TokenPredicates, UsableAndFresh) {
  const auto t = token("a", kT0 + 10s, kT0 + 20s);
  EXPECT_TRUE(is_fresh(t.get(), kT0));
  EXPECT_FALSE(is_fresh(t.get(), kT0 + 10s));
  EXPECT_TRUE(is_usable(t.get(), kT0 + 19s));
  EXPECT_FALSE(is_usable(t.get(), kT0 + 20s));
  EXPECT_FALSE(is_usable(nullptr, kT0));
}

}  // namespace
}  // namespace sandgate::secrets
