#pragma once

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <chrono>
#include <functional>
#include <memory>

namespace sandgate::proxy {

// One deadline per session, pushed forward on progress instead of racing every read against
// its own timer (no allocation per operation). When the deadline passes, on_expire runs once
// (it cancels the session's sockets); the session then sees operation_aborted and asks
// expired() why. Runs on the session's executor; not thread-safe.
class Watchdog : public std::enable_shared_from_this<Watchdog> {
 public:
  using clock = std::chrono::steady_clock;

  explicit Watchdog(boost::asio::any_io_executor ex) : timer_(ex) {}

  // Starts the timer coroutine. on_expire must not outlive what it touches: call stop()
  // before those objects go away.
  void start(std::function<void()> on_expire) {
    on_expire_ = std::move(on_expire);
    boost::asio::co_spawn(timer_.get_executor(), run(shared_from_this()), boost::asio::detached);
  }

  // Sets the deadline to now + d (earlier or later than before).
  void arm(clock::duration d) {
    deadline_ = clock::now() + d;
    if (deadline_ < timer_.expiry()) timer_.expires_at(deadline_);  // wakes the waiter early
  }
  void disarm() { deadline_ = clock::time_point::max(); }
  bool expired() const { return expired_; }

  void stop() {
    on_expire_ = nullptr;
    stopped_ = true;
    timer_.cancel();
  }

 private:
  static boost::asio::awaitable<void> run(std::shared_ptr<Watchdog> self) {
    self->timer_.expires_at(self->deadline_);
    while (!self->stopped_) {
      co_await self->timer_.async_wait(boost::asio::as_tuple(boost::asio::use_awaitable));
      if (self->stopped_) break;
      if (clock::now() >= self->deadline_) {
        self->expired_ = true;
        if (auto fn = std::move(self->on_expire_)) fn();
        break;
      }
      self->timer_.expires_at(self->deadline_);
    }
  }

  boost::asio::steady_timer timer_;
  clock::time_point deadline_ = clock::time_point::max();
  std::function<void()> on_expire_;
  bool expired_ = false;
  bool stopped_ = false;
};

}  // namespace sandgate::proxy
