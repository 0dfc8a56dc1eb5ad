#pragma once

// What the store tests share (store_test.cpp, aws_local_store_test.cpp): a clock the test
// moves, RFC 3339 text of a time, and a blocking get().

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>
#include <chrono>
#include <ctime>
#include <functional>
#include <mutex>
#include <string>

#include "secrets/store.hpp"

namespace sandgate::secrets::test_support {

// A wall clock the test moves.
class ManualClock {
 public:
  ManualClock() : now_(std::chrono::time_point_cast<std::chrono::seconds>(WallClock::now())) {}
  TimePoint now() const {
    const std::lock_guard lock(mutex_);
    return now_;
  }
  void advance(WallClock::duration d) {
    const std::lock_guard lock(mutex_);
    now_ += d;
  }
  std::function<TimePoint()> fn() {
    return [this] { return now(); };
  }

 private:
  mutable std::mutex mutex_;
  TimePoint now_;
};

inline std::string rfc3339(TimePoint t) {
  const std::time_t tt = WallClock::to_time_t(t);
  std::tm tm{};
  gmtime_r(&tt, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return text;
}

// store.get() from a thread of the test's own, waited for.
inline TokenResult get(CredentialStore& store, std::string_view name, const Scope& scope = {},
                       std::chrono::milliseconds wait = std::chrono::seconds(5)) {
  boost::asio::io_context io;
  auto future = boost::asio::co_spawn(io, store.get(name, scope, wait), boost::asio::use_future);
  io.run();
  return future.get();
}

}  // namespace sandgate::secrets::test_support
