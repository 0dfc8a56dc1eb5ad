#pragma once

#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <functional>
#include <memory>

#include "proxy/handler_memory.hpp"

namespace sandgate::proxy {

// One deadline per session, pushed forward on progress instead of racing every read against
// its own timer (no allocation per operation). When the deadline passes, on_expire runs (it
// cancels the session's sockets); the session then sees operation_aborted and asks expired()
// why. A later arm() sets a new deadline and waits again, so whatever the session does after
// an expiry (an error response, say) is under a deadline too; expired() stays true. Runs on
// the session's executor; not thread-safe.
class Watchdog : public std::enable_shared_from_this<Watchdog> {
 public:
  using clock = std::chrono::steady_clock;

  explicit Watchdog(boost::asio::any_io_executor ex) : timer_(ex) {}

  // Starts the timer. on_expire must not outlive what it touches: call stop() before those
  // objects go away.
  void start(std::function<void()> on_expire) {
    on_expire_ = std::move(on_expire);
    wait();
  }

  // Sets the deadline to now + d (earlier or later than before).
  void arm(clock::duration d) {
    deadline_ = clock::now() + d;
    if (stopped_ || !on_expire_) return;
    if (!waiting_) {
      wait();  // it fired before: wait for the new deadline
    } else if (deadline_ < timer_.expiry()) {
      timer_.expires_at(deadline_);  // wakes the waiter early
    }
  }
  void disarm() { deadline_ = clock::time_point::max(); }
  bool expired() const { return expired_; }

  void stop() {
    on_expire_ = nullptr;
    stopped_ = true;
    timer_.cancel();
  }

 private:
  // A plain completion handler rather than a coroutine: one pending wait is all an idle
  // session's watchdog holds. The handler keeps the watchdog alive until it has run.
  void wait() {
    waiting_ = true;
    timer_.expires_at(deadline_);
    timer_.async_wait(exact_memory([self = shared_from_this()](boost::system::error_code) {
      if (self->stopped_) return;
      if (clock::now() >= self->deadline_) {
        self->waiting_ = false;
        self->expired_ = true;
        if (self->on_expire_) self->on_expire_();
        return;
      }
      self->wait();  // pushed forward (or woken early): wait on
    }));
  }

  boost::asio::steady_timer timer_;
  clock::time_point deadline_ = clock::time_point::max();
  std::function<void()> on_expire_;
  bool waiting_ = false;
  bool expired_ = false;
  bool stopped_ = false;
};

}  // namespace sandgate::proxy
