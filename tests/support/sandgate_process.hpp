#pragma once

#include <sys/types.h>

#include <boost/json/object.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "support/temp_dir.hpp"

namespace sandgate::test {

// How to start the daemon under test.
struct SandgateOptions {
  // TOML tables appended to the generated head ([limits], [dns], [dns.hosts], [profiles.*],
  // [sandboxes.*]). The head sets workers, sandboxes_dir = "", [listeners] (explicit on
  // explicit_listen, admin on 127.0.0.1:0) and [log]; `tables` must not repeat those.
  std::string tables;
  unsigned workers = 1;
  // The explicit listener; its port is read from the ready line.
  std::string explicit_listen = "127.0.0.1:0";
  // More lines for [listeners] ("transparent = [...]", "dns = [...]").
  std::string listeners = {};
  // The sandboxes_dir value; "" = none.
  std::string sandboxes_dir = {};
  // The admin listener.
  std::string admin_listen = "127.0.0.1:0";
  // Run the daemon through this command prefix (e.g. {"nsenter", "--net=/run/netns/x"}).
  std::vector<std::string> wrapper = {};
  // false: audit = "stdout" and the daemon's stdout goes to a file the test reads.
  // true: audit = "<tmp>/audit.log" (the `[log] audit = PATH` form).
  bool audit_to_file = false;
  // Non-empty: audit = this path, as the daemon sees it (e.g. on a tmpfs mounted in its own
  // mount namespace by `wrapper`); audit_text() reads it through /proc/PID/root.
  std::string audit_path = {};
  // More lines for [log] (e.g. "audit_signing_key = \"...\"").
  std::string log = {};
  // true: the daemon's stdout is a pipe whose read end the test holds (stdout_pipe()) and
  // may leave unread; with audit = "stdout" (the default) the audit log goes there, and
  // audit_text() is empty.
  bool stdout_pipe = false;
  std::chrono::milliseconds ready_timeout{15000};
};

// The real sandgate binary ($SANDGATE_BIN), started with a generated config in a temp dir.
// The constructor waits for the JSON ready line on stderr and reads the bound ports from it; it
// throws if the daemon exits or stays silent. The destructor stops it (SIGTERM, then SIGKILL)
// and reaps it. It records a test failure if the daemon had died on its own (a crash is always a
// bug), or if sandgate_errors_total{code="INTERNAL_ERROR"} moved (an exception escaped a
// session). Not thread-safe; use from the test's thread.
class SandgateProcess {
 public:
  explicit SandgateProcess(SandgateOptions options);
  ~SandgateProcess();
  SandgateProcess(const SandgateProcess&) = delete;
  SandgateProcess& operator=(const SandgateProcess&) = delete;

  std::uint16_t explicit_port() const { return explicit_port_; }
  std::uint16_t admin_port() const { return admin_port_; }
  pid_t pid() const { return pid_; }
  // "http://ID:TOKEN@127.0.0.1:PORT", for curl -x.
  std::string proxy_url(const std::string& id, const std::string& token) const;
  const std::string& config_path() const { return config_path_; }
  const TempDir& dir() const { return dir_; }
  // The read end of the daemon's stdout (SandgateOptions::stdout_pipe), else -1.
  int stdout_pipe() const { return stdout_pipe_; }

  // Rewrites the config with new tables, sends SIGHUP and waits for the "reloaded" event.
  // Returns false (with the stderr text and the daemon's thread states in `error`) on
  // reload_failed or timeout.
  bool reload(const std::string& tables, std::string* error = nullptr);

  // Whether the daemon is still running (reaps it if it exited).
  bool alive();
  // Stops the daemon with SIGTERM and returns its exit code (128 + signal if killed).
  int stop(std::chrono::milliseconds grace = std::chrono::milliseconds(3000));
  // SIGKILL, as a crash or the OOM killer would, and reaps it (the test's doing, no failure).
  void kill_now();

  // The audit log: raw text, and every complete line parsed (a line that is not a JSON object
  // is reported as a test failure).
  std::string audit_text() const;
  std::vector<boost::json::object> audit_lines() const;
  // Waits until a line satisfying `pred` appears at index >= from; returns it.
  std::optional<boost::json::object> wait_audit(
      const std::function<bool(const boost::json::object&)>& pred,
      std::chrono::milliseconds timeout = std::chrono::milliseconds(3000),
      std::size_t from = 0) const;
  // Shorthand: the first line with event.code == code (and, if given, reason == event.reason).
  std::optional<boost::json::object> wait_audit_code(
      const std::string& code, const std::string& reason = {},
      std::chrono::milliseconds timeout = std::chrono::milliseconds(3000)) const;
  std::string stderr_text() const;
  // Each of the daemon's threads from /proc: state, wait channel, pending, blocked and caught
  // signals (for failure messages).
  std::string thread_states() const;
  // GET /metrics on the admin listener ("" when it does not answer).
  std::string metrics_text() const;
  // Waits until no client connection is open any more (sandgate_active_connections is 0):
  // every session has ended and given its slots back.
  bool wait_no_connections(
      std::chrono::milliseconds timeout = std::chrono::milliseconds(3000)) const;

 private:
  std::string render(const std::string& tables) const;

  SandgateOptions options_;
  TempDir dir_;
  std::string config_path_;
  std::string audit_path_;
  std::string stderr_path_;
  int stdout_pipe_ = -1;
  pid_t pid_ = -1;
  int exit_code_ = -1;  // valid once reaped
  bool stopped_by_us_ = false;
  std::uint16_t explicit_port_ = 0;
  std::uint16_t admin_port_ = 0;
};

// $SANDGATE_BIN, or a failure message when unset.
std::string sandgate_binary();

}  // namespace sandgate::test
