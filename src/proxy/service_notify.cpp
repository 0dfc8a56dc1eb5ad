#include "proxy/service_notify.hpp"

#include <systemd/sd-daemon.h>
#include <time.h>

#include <atomic>
#include <boost/asio/post.hpp>
#include <string>
#include <utility>

namespace sandgate::proxy::service {

namespace {

void send(const std::string& message) {
  (void)::sd_notify(0, message.c_str());
}

// One line: a STATUS= value ends at the first newline (systemd would read the rest as
// another assignment).
std::string status_line(std::string_view status) {
  std::string out = "STATUS=";
  for (const char c : status) out += (c == '\n' ? ' ' : c);
  return out;
}

std::uint64_t monotonic_usec() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1000000u +
         static_cast<std::uint64_t>(ts.tv_nsec) / 1000u;
}

}  // namespace

void notify_ready(std::string_view status) {
  send("READY=1\n" + status_line(status));
}

void notify_reloading() {
  send("RELOADING=1\nMONOTONIC_USEC=" + std::to_string(monotonic_usec()) + "\n" +
       status_line("reloading the config"));
}

void notify_stopping(std::string_view status) {
  send("STOPPING=1\n" + status_line(status));
}

void notify_status(std::string_view status) {
  send(status_line(status));
}

void notify_watchdog() {
  send("WATCHDOG=1");
}

std::optional<std::chrono::microseconds> watchdog_timeout() {
  std::uint64_t usec = 0;
  if (::sd_watchdog_enabled(0, &usec) <= 0 || usec == 0) return std::nullopt;
  return std::chrono::microseconds(usec);
}

// Shared with the stamps posted to the workers, which may run (or be destroyed unrun) after
// the heartbeat is gone.
struct WorkerHeartbeat::State {
  explicit State(std::vector<boost::asio::io_context*> w)
      : workers(std::move(w)), stamps(workers.size()) {}
  std::vector<boost::asio::io_context*> workers;
  std::vector<std::atomic<std::uint64_t>> stamps;  // the last round each worker answered
  std::uint64_t round = 0;                         // main thread only, as the rest below
  std::chrono::steady_clock::duration interval{};
  std::function<void()> on_alive;
  std::function<void(std::size_t)> on_stuck;
  std::function<void()> on_recovered;
  bool stalled = false;
  bool stopped = false;
};

WorkerHeartbeat::WorkerHeartbeat(boost::asio::io_context& main,
                                 std::vector<boost::asio::io_context*> workers,
                                 std::chrono::steady_clock::duration interval,
                                 std::function<void()> on_alive,
                                 std::function<void(std::size_t)> on_stuck,
                                 std::function<void()> on_recovered)
    : timer_(main), state_(std::make_shared<State>(std::move(workers))) {
  state_->interval = interval;
  state_->on_alive = std::move(on_alive);
  state_->on_stuck = std::move(on_stuck);
  state_->on_recovered = std::move(on_recovered);
}

WorkerHeartbeat::~WorkerHeartbeat() {
  stop();
}

void WorkerHeartbeat::start() {
  state_->stopped = false;
  round();
}

void WorkerHeartbeat::stop() {
  state_->stopped = true;
  timer_.cancel();
}

void WorkerHeartbeat::round() {
  State& s = *state_;
  std::optional<std::size_t> stuck;
  for (std::size_t i = 0; i < s.stamps.size() && !stuck; ++i) {
    if (s.stamps[i].load(std::memory_order_acquire) != s.round) stuck = i;
  }
  if (!stuck) {
    if (std::exchange(s.stalled, false) && s.on_recovered) s.on_recovered();
    if (s.on_alive) s.on_alive();
    // A new round only once the last one is answered: a slow worker is never owed two.
    ++s.round;
    for (std::size_t i = 0; i < s.workers.size(); ++i) {
      boost::asio::post(*s.workers[i], [state = state_, i, r = s.round] {
        state->stamps[i].store(r, std::memory_order_release);
      });
    }
  } else if (!s.stalled) {
    s.stalled = true;
    if (s.on_stuck) s.on_stuck(*stuck);
  }
  timer_.expires_after(s.interval);
  timer_.async_wait([this, state = state_](const boost::system::error_code& ec) {
    if (ec || state->stopped) return;
    round();
  });
}

}  // namespace sandgate::proxy::service
