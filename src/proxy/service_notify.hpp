#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

namespace sandgate::proxy::service {

// Tells the service manager what the daemon is doing (systemd's Type=notify protocol, through
// libsystemd's sd_notify). Each call is one datagram to $NOTIFY_SOCKET and a no-op when that is
// unset (the daemon was not started by systemd), so the daemon calls them unconditionally.
// Failures to send are ignored: the service manager's view is advice, never a reason to stop.
// Thread-safe (sd_notify opens a socket per call).

// READY=1 with a STATUS= line: the listeners are bound and the config is loaded; also sent
// after each SIGHUP reload, whatever its outcome (the previous config stays on failure).
void notify_ready(std::string_view status);
// RELOADING=1 with MONOTONIC_USEC= (CLOCK_MONOTONIC now; systemd 253+ requires it for
// Type=notify-reload, older versions ignore it) and a STATUS= line.
void notify_reloading();
// STOPPING=1 with a STATUS= line: shutdown has begun.
void notify_stopping(std::string_view status);
// STATUS= only (what `systemctl status` shows).
void notify_status(std::string_view status);
// WATCHDOG=1: the daemon is alive. Only WorkerHeartbeat sends it.
void notify_watchdog();

// The watchdog timeout the service manager asks this process for (WATCHDOG_USEC, when
// WATCHDOG_PID is unset or names this process); nullopt when there is none.
std::optional<std::chrono::microseconds> watchdog_timeout();

// Sends the watchdog pings, but only while every worker's event loop turns. Each round (every
// `interval`, half the watchdog timeout) posts a stamp to every worker's io_context; a round
// pings (on_alive) only when every stamp of the round before came back. A worker stuck in one
// handler (a blocking call, a loop that never yields) misses its stamp, so the pings stop and
// the service manager restarts the daemon once its timeout passes; on_stuck names the first
// such worker, once per stall, and on_recovered follows when every worker answers again
// (before the ping that round sends). The main thread's io_context runs the rounds, so a stuck main
// thread stops the pings too. Runs on `main`'s thread; the worker io_contexts must outlive the
// rounds (stop() or stopping `main` ends them).
class WorkerHeartbeat {
 public:
  WorkerHeartbeat(boost::asio::io_context& main, std::vector<boost::asio::io_context*> workers,
                  std::chrono::steady_clock::duration interval, std::function<void()> on_alive,
                  std::function<void(std::size_t worker)> on_stuck,
                  std::function<void()> on_recovered = {});
  ~WorkerHeartbeat();
  WorkerHeartbeat(const WorkerHeartbeat&) = delete;
  WorkerHeartbeat& operator=(const WorkerHeartbeat&) = delete;

  // The first round runs at once (no stamp is owed yet, so it pings).
  void start();
  void stop();

 private:
  struct State;
  void round();

  boost::asio::steady_timer timer_;
  std::shared_ptr<State> state_;
};

}  // namespace sandgate::proxy::service
