#pragma once

// Running the sandboxed command so that it cannot reach the operator's terminal (THREATS.md
// row 26): it starts in a session of its own (setsid), so the launcher's controlling terminal
// is not its controlling terminal and TIOCSTI, /dev/tty and job-control signals do not reach
// it. Where the launcher has a terminal, the command gets a pty the launcher owns instead (as
// `su --pty` and `script` do); the launcher relays bytes between the two.

#include <sys/types.h>

#include <array>
#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace sandgate::launcher {

// How the command's fds 0-2 are set up, from which of the launcher's fds 0-2 are terminals.
struct TerminalPlan {
  bool pty = false;              // open a pty pair; its slave is the command's terminal
  std::array<bool, 3> on_pty{};  // command fd i is the pty slave (else the launcher's fd i)
  bool relay_input = false;      // launcher stdin (a terminal, put in raw mode) -> pty
  int output_fd = -1;            // pty output -> this launcher fd (a terminal)
  int size_fd = -1;              // window size (and its changes) taken from this fd
};

// Every terminal fd is replaced by the pty slave, so the command holds no fd of the operator's
// terminal at all; what it writes to the pty is shown on the first of the launcher's
// terminal fds among stdout, stderr, stdin. No terminal: no pty, fds passed through.
TerminalPlan plan_terminal(const std::array<bool, 3>& is_terminal);

// Forks; the child starts a new session (plan_terminal on the launcher's fds), resets the
// signal mask and execs argv (argv[0] absolute, or looked up in the launcher's PATH) with `env`.
// The parent relays the pty if there is one, forwards SIGINT, SIGTERM and SIGHUP to the child,
// and returns once the child has ended: its exit status, 128 + N when killed by signal N, 127
// when it could not be started, 1 when the launcher could not fork. The caller should have
// blocked the stop signals (block_stop_signals) before any other setup, so none is lost.
// The launcher's terminal is restored on every way out of this function.
// `started` is called in the launcher with the command's pid right after the fork. `enter`,
// when given, runs in the child just before the exec (after the new session is set up); a
// non-empty result is an error: the child prints it ("sandgate-launch: " prefix) and exits 127.
int run_in_new_session(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                       const std::function<void(pid_t)>& started = {},
                       const std::function<std::string()>& enter = {});

// run --timeout: at `at`, stop(SIGTERM); `kill_after` later, stop(SIGKILL), unless `left`
// says nothing of the sandbox runs any more. stop signals the command's process group and
// whatever else is the sandbox's; the grace period goes on after the command itself has ended
// (a child of it that ignores SIGTERM still gets the KILL).
struct Deadline {
  std::chrono::steady_clock::time_point at;
  std::chrono::milliseconds kill_after{0};
  std::function<void(int sig)> stop;
  std::function<bool()> left;
};

// How the command ended.
struct SessionResult {
  int status = 1;          // what run_in_new_session returns
  int exit_code = -1;      // it exited with this (-1: it did not exit by itself)
  int signal = 0;          // it was killed by this signal (0: it was not)
  bool timed_out = false;  // the Deadline came first
  bool killed = false;     // ... and the grace period ran out: SIGKILL was sent
  std::chrono::steady_clock::duration duration{};  // from the fork to the command's end
};

// run_in_new_session with an optional deadline, and the details.
SessionResult run_session(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                          const std::function<void(pid_t)>& started,
                          const std::function<std::string()>& enter,
                          const std::optional<Deadline>& deadline);

// Ends what the command left when the launcher dies without finishing (SIGKILL, a crash): a
// process forked from the launcher (root, stop signals blocked, stdio on /dev/null) that waits
// on a pipe whose only write end the launcher holds (close-on-exec, so the command has none).
// EOF without a goodbye means the launcher is gone: it calls reap(pid of the command, or 0)
// and exits. PR_SET_PDEATHSIG alone would not do: setpriv's change of uid clears it, and the
// command could clear it itself. The destructor says goodbye (the launcher's teardown ends
// what is left on a normal exit).
class DeathWatch {
 public:
  explicit DeathWatch(std::function<void(long command_pid)> reap);
  ~DeathWatch();
  DeathWatch(const DeathWatch&) = delete;
  DeathWatch& operator=(const DeathWatch&) = delete;
  // Tells the watcher which process is the command.
  void started(pid_t command);

 private:
  int pipe_ = -1;  // write end
  pid_t watcher_ = -1;
};

}  // namespace sandgate::launcher
