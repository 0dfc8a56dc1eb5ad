#pragma once

// The status object `sandgate-launch run --json` writes once it has finished (pure): what the
// orchestrator that started the sandbox reads to choose a retry policy (docs/launcher.md,
// "Limits and outcomes").

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "launcher/admin_client.hpp"

namespace sandgate::launcher {

// The `error` codes of a run. Public contract, like code_name(): never reworded.
inline constexpr std::string_view kSandboxCreateFailed = "SANDBOX_CREATE_FAILED";
inline constexpr std::string_view kSandboxCommandTimeout = "SANDBOX_COMMAND_TIMEOUT";
inline constexpr std::string_view kSandboxOom = "SANDBOX_OOM";

// run's exit status when --timeout stopped the command (as timeout(1)).
inline constexpr int kTimeoutExit = 124;

struct RunOutcome {
  std::string sandbox;
  int status = 1;                // the launcher's exit status
  std::string error;             // one of the codes above, "" none (the command ran to its end)
  std::string message;           // the launcher's error line, "" none
  bool retryable = false;        // with an error: whether the same run may succeed later
  bool started = false;          // the command was started
  std::optional<int> exit_code;  // it exited with this
  std::optional<int> signal;     // it was killed by this signal
  std::chrono::milliseconds duration{0};  // started: from its start to its end
  // What was asked.
  std::optional<std::chrono::milliseconds> timeout;
  std::chrono::milliseconds kill_after{0};
  std::optional<std::uint64_t> memory_bytes;
  std::optional<std::uint64_t> pids;
  bool killed_after_grace = false;  // timed out, and the grace period ran out (SIGKILL)
  // From the sandbox's cgroup (with --memory or --pids).
  std::optional<std::uint64_t> oom_kills;
  std::optional<std::uint64_t> pids_limit_hits;
  // The network refusals of the run (nullopt: none known; denials_error says why).
  std::optional<DenialSnapshot> denials;
  std::string denials_error;
};

// Sets error, retryable and status from how the command ended: a timeout first (exit 124),
// then an OOM kill anywhere in the sandbox (the command's own status), else none.
void classify(RunOutcome& outcome, bool timed_out);

// One line of JSON, "\n" included.
std::string outcome_json(const RunOutcome& outcome);

// What `run` and `exec` print on stderr once the command has ended, unless --quiet
// (docs/launcher.md, "What was refused"): one line per refused destination (host[:port]; the
// denials of one destination merged whatever their protocol), most refused first, with how
// often, the reason(s), and the line that would allow it as the daemon suggested it; at most
// `max_lines` lines in all, the rest as "and N more". Every byte that is not printable ASCII
// is shown as '?' (a refused name comes from the sandbox). "" when nothing was refused.
inline constexpr std::size_t kMaxSummaryLines = 20;
std::string denial_summary(std::string_view sandbox, const DenialSnapshot& denials,
                           std::size_t max_lines = kMaxSummaryLines);

}  // namespace sandgate::launcher
