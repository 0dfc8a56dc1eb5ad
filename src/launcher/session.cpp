#include "launcher/session.hpp"

#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>

namespace sandgate::launcher {
namespace {

constexpr std::size_t kChunk = 4096;
// After the command has ended, at most this many reads of what is left in the pty (a
// background process that keeps writing must not hold the launcher).
constexpr int kMaxDrainReads = 256;

// Closes on destruction.
class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  void reset(int fd = -1) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

 private:
  int fd_;
};

// The launcher's terminal in raw mode while it relays keystrokes to the command's pty (the pty's
// own line discipline does echo, line editing and ^C); restored on destruction, so on every way
// out of run_in_new_session. A SIGKILLed launcher cannot restore it (`stty sane` / `reset`).
class RawTerminal {
 public:
  explicit RawTerminal(int fd) : fd_(fd) {
    if (::tcgetattr(fd, &saved_) != 0) {
      fd_ = -1;
      return;
    }
    termios raw = saved_;
    ::cfmakeraw(&raw);
    // TCSANOW, not TCSAFLUSH: keys typed before the command started still reach it.
    if (::tcsetattr(fd, TCSANOW, &raw) != 0) fd_ = -1;
  }
  ~RawTerminal() {
    if (fd_ >= 0) ::tcsetattr(fd_, TCSADRAIN, &saved_);
  }
  RawTerminal(const RawTerminal&) = delete;
  RawTerminal& operator=(const RawTerminal&) = delete;

 private:
  int fd_;
  termios saved_{};
};

void copy_window_size(int from, int to) {
  winsize size{};
  if (::ioctl(from, TIOCGWINSZ, &size) == 0) ::ioctl(to, TIOCSWINSZ, &size);
}

// Blocking write of everything; output the operator's terminal cannot take (it hung up) is
// dropped, the command keeps running.
void write_all(int fd, const char* data, std::size_t size) {
  while (size > 0) {
    const ssize_t n = ::write(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    data += n;
    size -= static_cast<std::size_t>(n);
  }
}

// A pty pair for the plan. The slave gets the line discipline of the launcher's stdin when
// keystrokes are relayed (the command sees the terminal the operator had), else raw settings:
// the operator's terminal, still cooked, does the output processing.
std::optional<std::pair<int, int>> open_pty(const TerminalPlan& plan, std::string* error) {
  int master = -1;
  int slave = -1;
  if (::openpty(&master, &slave, nullptr, nullptr, nullptr) != 0) {
    *error = std::string("cannot open a pty for the command: ") + std::strerror(errno);
    return std::nullopt;
  }
  ::fcntl(master, F_SETFD, FD_CLOEXEC);
  ::fcntl(master, F_SETFL, ::fcntl(master, F_GETFL) | O_NONBLOCK);
  ::fcntl(slave, F_SETFD, FD_CLOEXEC);  // dup2 onto 0-2 in the child clears it there
  termios mode{};
  const int from = plan.relay_input ? STDIN_FILENO : plan.output_fd;
  if (::tcgetattr(from, &mode) == 0) {
    if (!plan.relay_input) ::cfmakeraw(&mode);
    ::tcsetattr(slave, TCSANOW, &mode);
  }
  copy_window_size(plan.size_fd, master);
  return std::make_pair(master, slave);
}

[[noreturn]] void child_fail(const char* what) {
  const std::string message =
      std::string("sandgate-launch: ") + what + ": " + std::strerror(errno) + "\n";
  (void)!::write(STDERR_FILENO, message.data(), message.size());
  ::_exit(127);
}

// In the forked child: a new session (no controlling terminal), the pty slave as its
// controlling terminal and on the planned fds, no other descriptor, then the command.
[[noreturn]] void start_child(const TerminalPlan& plan, int slave, char* const* argv,
                              char* const* envp, const std::function<std::string()>& enter) {
  if (::setsid() < 0) child_fail("setsid");
  if (plan.pty) {
    if (::ioctl(slave, TIOCSCTTY, 0) != 0) child_fail("cannot make the pty the terminal");
    for (int fd = 0; fd < 3; ++fd) {
      if (plan.on_pty[static_cast<std::size_t>(fd)] && ::dup2(slave, fd) < 0) child_fail("dup2");
    }
  }
  if (enter) {
    if (const std::string error = enter(); !error.empty()) {
      const std::string message = "sandgate-launch: cannot enter the sandbox: " + error + "\n";
      (void)!::write(STDERR_FILENO, message.data(), message.size());
      ::_exit(127);
    }
  }
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  // Only 0-2 go in. A socket keeps the network namespace it was made in, so a descriptor the
  // launcher inherited from whoever started it (an agent runner's connection, a host service's
  // socket) would be a way out that no route or nft rule of the sandbox sees.
  ::closefrom(3);
  ::execvpe(argv[0], argv, envp);
  const std::string message =
      std::string("sandgate-launch: cannot start ") + argv[0] + ": " + std::strerror(errno) + "\n";
  (void)!::write(STDERR_FILENO, message.data(), message.size());
  ::_exit(127);
}

// Reads what the pty has and shows it. False when the pty is gone (every slave closed: EIO).
bool pump_output(int master, int output_fd) {
  char buf[kChunk];
  const ssize_t n = ::read(master, buf, sizeof buf);
  if (n > 0) {
    write_all(output_fd, buf, static_cast<std::size_t>(n));
    return true;
  }
  return n < 0 && (errno == EAGAIN || errno == EINTR);
}

}  // namespace

TerminalPlan plan_terminal(const std::array<bool, 3>& is_terminal) {
  TerminalPlan plan;
  plan.on_pty = is_terminal;
  plan.pty = is_terminal[0] || is_terminal[1] || is_terminal[2];
  if (!plan.pty) return plan;
  plan.relay_input = is_terminal[0];
  for (const int fd : {1, 2, 0}) {
    if (is_terminal[static_cast<std::size_t>(fd)]) {
      plan.output_fd = fd;
      break;
    }
  }
  plan.size_fd = is_terminal[0] ? 0 : plan.output_fd;
  return plan;
}

int run_in_new_session(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                       const std::function<void(pid_t)>& started,
                       const std::function<std::string()>& enter) {
  return run_session(argv, env, started, enter, std::nullopt).status;
}

SessionResult run_session(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                          const std::function<void(pid_t)>& started,
                          const std::function<std::string()>& enter,
                          const std::optional<Deadline>& deadline) {
  using Clock = std::chrono::steady_clock;
  SessionResult result;
  const TerminalPlan plan = plan_terminal({::isatty(0) == 1, ::isatty(1) == 1, ::isatty(2) == 1});
  std::vector<char*> cargv;
  std::vector<char*> cenv;
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  for (const auto& e : env) cenv.push_back(const_cast<char*>(e.c_str()));
  cargv.push_back(nullptr);
  cenv.push_back(nullptr);

  // Signals come through a signalfd, polled with the pty; they stay blocked in the launcher.
  sigset_t handled;
  sigemptyset(&handled);
  for (const int sig : {SIGINT, SIGTERM, SIGHUP, SIGCHLD, SIGWINCH}) sigaddset(&handled, sig);
  ::sigprocmask(SIG_BLOCK, &handled, nullptr);
  const Fd signals(::signalfd(-1, &handled, SFD_CLOEXEC | SFD_NONBLOCK));
  if (signals.get() < 0) {
    std::fprintf(stderr, "sandgate-launch: signalfd: %s\n", std::strerror(errno));
    return result;
  }
  Fd master;
  Fd slave;
  if (plan.pty) {
    std::string error;
    const auto pair = open_pty(plan, &error);
    if (!pair) {
      std::fprintf(stderr, "sandgate-launch: %s\n", error.c_str());
      return result;
    }
    master.reset(pair->first);
    slave.reset(pair->second);
  }
  std::optional<RawTerminal> raw;
  if (plan.relay_input) raw.emplace(STDIN_FILENO);

  const pid_t child = ::fork();
  if (child == 0) start_child(plan, slave.get(), cargv.data(), cenv.data(), enter);
  if (child < 0) {
    std::fprintf(stderr, "sandgate-launch: cannot fork: %s\n", std::strerror(errno));
    return result;
  }
  const Clock::time_point began = Clock::now();
  if (started) started(child);
  slave.reset();  // the master reads EIO once the command's side (all its copies) is closed

  std::string to_master;  // keystrokes the pty has not taken yet
  bool input_open = plan.relay_input;
  bool master_open = plan.pty;
  int wstatus = 0;
  while (true) {
    const pid_t done = ::waitpid(child, &wstatus, WNOHANG);
    if (done == child) break;
    if (done < 0 && errno != EINTR) {
      std::fprintf(stderr, "sandgate-launch: waitpid: %s\n", std::strerror(errno));
      return result;
    }
    int wait_ms = -1;
    if (deadline) {
      const Clock::time_point now = Clock::now();
      if (!result.timed_out && now >= deadline->at) {
        result.timed_out = true;
        deadline->stop(SIGTERM);
      }
      if (result.timed_out && !result.killed && now >= deadline->at + deadline->kill_after) {
        result.killed = true;
        deadline->stop(SIGKILL);
      }
      const Clock::time_point next =
          !result.timed_out ? deadline->at
          : !result.killed  ? deadline->at + deadline->kill_after
                            : now + std::chrono::milliseconds(100);  // SIGCHLD comes anyway
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(next - now).count();
      wait_ms = static_cast<int>(std::clamp<long long>(left, 0, 60'000));
    }
    pollfd fds[3] = {{signals.get(), POLLIN, 0}, {-1, 0, 0}, {-1, 0, 0}};
    if (input_open && master_open && to_master.empty()) fds[1] = {STDIN_FILENO, POLLIN, 0};
    if (master_open) {
      const short out = to_master.empty() ? 0 : POLLOUT;
      fds[2] = {master.get(), static_cast<short>(POLLIN | out), 0};
    }
    if (::poll(fds, 3, wait_ms) < 0) {
      if (errno == EINTR) continue;
      std::fprintf(stderr, "sandgate-launch: poll: %s\n", std::strerror(errno));
      ::kill(child, SIGKILL);
      continue;  // reaped on the next round
    }
    signalfd_siginfo info{};
    while (::read(signals.get(), &info, sizeof info) == sizeof info) {
      const int sig = static_cast<int>(info.ssi_signo);
      if (sig == SIGWINCH && master_open) {
        copy_window_size(plan.size_fd, master.get());  // the kernel tells the command's group
      } else if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP) {
        ::kill(child, sig);
      }
    }
    if (fds[1].revents != 0) {
      char buf[kChunk];
      const ssize_t n = ::read(STDIN_FILENO, buf, sizeof buf);
      if (n > 0) {
        to_master.append(buf, static_cast<std::size_t>(n));
      } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
        input_open = false;  // the operator's terminal hung up
      }
    }
    if (master_open && (fds[2].revents & POLLOUT) != 0) {
      const ssize_t n = ::write(master.get(), to_master.data(), to_master.size());
      if (n > 0) to_master.erase(0, static_cast<std::size_t>(n));
    }
    if (master_open && (fds[2].revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
      master_open = pump_output(master.get(), plan.output_fd);
    }
  }
  result.duration = Clock::now() - began;
  // Timed out and the command is gone, but the rest of the sandbox has the grace period too
  // before the KILL (a child that ignores SIGTERM, or one still cleaning up).
  if (deadline && result.timed_out && !result.killed) {
    const Clock::time_point kill_at = deadline->at + deadline->kill_after;
    while (deadline->left() && Clock::now() < kill_at) {
      ::poll(nullptr, 0, 20);
    }
    if (deadline->left()) {
      result.killed = true;
      deadline->stop(SIGKILL);
    }
  }
  // What the command wrote just before it ended is still in the pty.
  for (int i = 0; master_open && i < kMaxDrainReads; ++i) {
    char buf[kChunk];
    const ssize_t n = ::read(master.get(), buf, sizeof buf);
    if (n <= 0) break;
    write_all(plan.output_fd, buf, static_cast<std::size_t>(n));
  }
  if (WIFEXITED(wstatus)) {
    result.exit_code = WEXITSTATUS(wstatus);
    result.status = result.exit_code;
  } else {
    result.signal = WTERMSIG(wstatus);
    result.status = 128 + result.signal;
  }
  return result;
}

namespace {

// The watcher's life: "P<pid>\n" names the command, "Q" is the goodbye, EOF is the launcher's
// death.
[[noreturn]] void watch(int from_launcher, const std::function<void(long)>& reap) {
  const int null = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  for (int fd = 0; fd < 3 && null >= 0; ++fd) ::dup2(null, fd);
  long command = 0;
  std::string text;
  while (true) {
    char buf[64];
    const ssize_t n = ::read(from_launcher, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    text.append(buf, static_cast<std::size_t>(n));
    if (text.find('Q') != std::string::npos) ::_exit(0);
    const auto end = text.find('\n');
    if (text.starts_with("P") && end != std::string::npos) {
      command = std::strtol(text.c_str() + 1, nullptr, 10);
      text.erase(0, end + 1);
    }
  }
  reap(command);
  ::_exit(0);
}

}  // namespace

DeathWatch::DeathWatch(std::function<void(long)> reap) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return;  // no watcher: teardown and gc still end leftovers
  watcher_ = ::fork();
  if (watcher_ == 0) {
    ::close(fds[1]);
    watch(fds[0], reap);
  }
  ::close(fds[0]);
  if (watcher_ < 0) {
    ::close(fds[1]);
    return;
  }
  pipe_ = fds[1];
}

void DeathWatch::started(pid_t command) {
  if (pipe_ < 0) return;
  const std::string message = "P" + std::to_string(command) + "\n";
  (void)!::write(pipe_, message.data(), message.size());
}

DeathWatch::~DeathWatch() {
  if (pipe_ >= 0) {
    (void)!::write(pipe_, "Q", 1);
    ::close(pipe_);
  }
  if (watcher_ > 0) {
    while (::waitpid(watcher_, nullptr, 0) < 0 && errno == EINTR) {
    }
  }
}

}  // namespace sandgate::launcher
