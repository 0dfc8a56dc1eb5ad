#pragma once

// `sandgate-launch run --approve-with CMD` (docs/launcher.md, "Answering held destinations"):
// while the sandbox's command runs, the launcher follows the daemon's GET /holds/events for
// its sandbox and answers each held destination with what CMD says: CMD runs through
// `/bin/sh -c` outside the sandbox, as the launcher's user, stdin /dev/null, with the hold in
// its environment (SANDGATE_HOLD_ID, _SANDBOX, _HOST, _PORT, _MODE, _METHOD, _PATH), and is
// killed at the hold's deadline. Its exit status is the answer:
//   0 allow once; 3 allow for the sandbox's life; anything else (or killed) deny, with the
//   first line of its stdout (printable, at most kMaxMessage bytes) as the message.
//
// Threads: one follows the stream (reconnecting with backoff when it breaks), kConcurrent run
// commands and post answers; the destructor ends them all (commands still running are killed).
// A command whose hold ends otherwise meanwhile (an operator answered it first) is killed too.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "http/client/plain_exchange.hpp"
#include "launcher/sandbox.hpp"

namespace sandgate::launcher {

// A held destination as a `held` event carries it.
struct HeldDestination {
  std::uint64_t id = 0;
  std::string sandbox;
  std::string host;
  std::uint16_t port = 0;
  std::string mode;
  std::string method;
  std::string path;
  std::int64_t since_ms = 0;  // when it began (Unix milliseconds)
};

// A `held` event's data; nullopt when it is not one.
std::optional<HeldDestination> parse_held(std::string_view data);

// `base` (the launcher's environment) with the hold's variables set.
std::vector<std::string> hold_environment(std::vector<std::string> base, const HeldDestination& h);

inline constexpr std::size_t kMaxMessage = 200;

// The answer for a command that exited with `exit_code` (nullopt: killed, or never ran)
// having written `out`: its action ("allow_once", "allow_sandbox", "deny") and, for a denial,
// the first line of `out` made printable and cut at kMaxMessage bytes.
struct HoldVerdict {
  std::string action;
  std::string message;
  bool operator==(const HoldVerdict&) const = default;
};
HoldVerdict verdict_of(std::optional<int> exit_code, std::string_view out);

// How long a hold that began at `since_ms` has left of `hold_timeout` at `now_ms`.
std::chrono::milliseconds time_left(std::int64_t since_ms, std::int64_t now_ms,
                                    std::chrono::milliseconds hold_timeout);

struct ApproverSettings {
  std::string command;  // run by /bin/sh -c
  std::string sandbox;
  std::string admin_host;  // IP literal
  std::uint16_t admin_port = 0;
  std::string token;  // the admin API's write token
  std::chrono::milliseconds hold_timeout{10'000};
  std::vector<std::string> environment;  // the launcher's own
};

// How `run --approve-with command` answers for `sandbox`: the admin listener and its token
// (read now), the hold timeout, the launcher's environment. Throws LaunchError (exit 2, before
// anything is set up) when the config names no listeners.admin_token_file or the launcher
// cannot read it. A launcher run as root takes the file of the daemon's user (its mode is
// checked all the same).
ApproverSettings approver_settings(const Settings& settings, const std::string& command,
                                   const std::string& sandbox);

class Approver {
 public:
  static constexpr std::size_t kConcurrent = 4;   // commands at a time
  static constexpr std::size_t kMaxWaiting = 64;  // holds queued beyond those (more: expire)

  explicit Approver(ApproverSettings settings);
  ~Approver();
  Approver(const Approver&) = delete;
  Approver& operator=(const Approver&) = delete;

 private:
  struct Job {
    std::uint64_t connection = 0;  // the stream it came on (a hold id names a hold only there)
    HeldDestination hold;
  };

  void follow();
  void on_held(std::string_view data, std::uint64_t connection);
  void on_answered(std::string_view data);
  void work();
  void answer(const HeldDestination& hold, const HoldVerdict& verdict);
  void warn(const std::string& message);

  const ApproverSettings settings_;
  http::PlainStream stream_;
  std::atomic<bool> stopping_{false};
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<Job> jobs_;
  std::uint64_t connection_ = 0;     // the stream's connections so far
  std::set<std::uint64_t> running_;  // holds of this connection whose command runs
  std::set<std::uint64_t> ended_;    // ... of them, those that ended meanwhile
  std::vector<std::thread> workers_;
  std::thread follower_;
};

}  // namespace sandgate::launcher
