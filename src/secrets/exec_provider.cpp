// provider = "exec": runs a helper (argv, no shell) that prints
// {"token": "...", "expires_at": "RFC 3339"} on stdout, under a timeout.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/value.hpp>
#include <cerrno>
#include <cstring>

#include "secrets/provider.hpp"
#include "secrets/redactor.hpp"

extern char** environ;

namespace sandgate::secrets {

namespace {

namespace asio = boost::asio;
using namespace asio::experimental::awaitable_operators;
constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);

constexpr std::size_t kMaxStdout = 64 * 1024;
constexpr std::size_t kMaxStderrLogged = 2 * 1024;

// Reads a pipe to its end, keeping at most `max` bytes (the rest is drained and dropped, so
// the helper never blocks on a full pipe). Sets `overflow` when something was dropped.
asio::awaitable<void> drain(asio::posix::stream_descriptor& pipe, std::string& out, std::size_t max,
                            bool& overflow) {
  char buffer[4096];
  for (;;) {
    auto [ec, n] = co_await pipe.async_read_some(asio::buffer(buffer), use_tuple);
    const std::size_t room = max - std::min(max, out.size());
    out.append(buffer, std::min(n, room));
    if (n > room) overflow = true;
    if (ec) co_return;
  }
}

struct Child {
  pid_t pid = -1;
  int out = -1;
  int err = -1;
  std::string error;
};

Child spawn(const std::vector<std::string>& command) {
  Child child;
  int out_pipe[2];
  int err_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0) {
    child.error = std::strerror(errno);
    return child;
  }
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) {
    child.error = std::strerror(errno);
    ::close(out_pipe[0]);
    ::close(out_pipe[1]);
    return child;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out_pipe[1], 1);
  posix_spawn_file_actions_adddup2(&actions, err_pipe[1], 2);
  // Nothing else of the daemon's: Asio opens sockets without O_CLOEXEC, so the helper would
  // otherwise hold every sandbox's connections and the listeners, and one that leaves a
  // process behind would keep them open after the daemon closed them.
  posix_spawn_file_actions_addclosefrom_np(&actions, 3);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  // Its own process group, so a timeout kills whatever the helper started too; default
  // signal handling and an empty mask whatever the daemon set.
  sigset_t none;
  sigemptyset(&none);
  sigset_t all;
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr,
                           POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP);
  std::vector<char*> argv;
  for (const std::string& arg : command) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  const int rc = ::posix_spawn(&child.pid, argv[0], &actions, &attr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  if (rc != 0) {
    child.error = std::strerror(rc);
    child.pid = -1;
    ::close(out_pipe[0]);
    ::close(err_pipe[0]);
    return child;
  }
  child.out = out_pipe[0];
  child.err = err_pipe[0];
  return child;
}

// Polls for the child's exit until `deadline`; then kills its process group and reaps it.
// Returns the wait status, and whether it had to be killed.
asio::awaitable<std::pair<int, bool>> reap(pid_t pid,
                                           std::chrono::steady_clock::time_point deadline) {
  asio::steady_timer timer(co_await asio::this_coro::executor);
  for (;;) {
    int status = 0;
    const pid_t done = ::waitpid(pid, &status, WNOHANG);
    if (done == pid || (done < 0 && errno != EINTR)) co_return std::pair{status, false};
    if (std::chrono::steady_clock::now() >= deadline) break;
    timer.expires_after(std::chrono::milliseconds(5));
    co_await timer.async_wait(use_tuple);
  }
  ::kill(-pid, SIGKILL);
  ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  co_return std::pair{status, true};
}

class ExecProvider final : public Provider {
 public:
  ExecProvider(const CredentialSpec& spec, ProviderContext context)
      : name_(spec.name),
        command_(spec.command),
        timeout_(spec.timeout),
        ttl_(spec.ttl),
        context_(std::move(context)) {}

  asio::awaitable<FetchResult> fetch(Scope) override {
    const std::string program = command_.empty() ? std::string() : command_.front();
    Child child = spawn(command_);
    if (child.pid < 0) co_return fetch_failure(false, program + ": cannot run: " + child.error);
    const auto executor = co_await asio::this_coro::executor;
    const auto deadline = std::chrono::steady_clock::now() + timeout_;
    // Shared with the watchdog's handler, which may run after this frame is gone.
    struct Pipes {
      asio::posix::stream_descriptor out, err;
    };
    const auto pipes =
        std::make_shared<Pipes>(Pipes{asio::posix::stream_descriptor(executor, child.out),
                                      asio::posix::stream_descriptor(executor, child.err)});
    std::string stdout_text;
    std::string stderr_text;
    bool out_overflow = false;
    bool err_overflow = false;

    // The pipes close when the helper (and what it started) exits; the watchdog closes them
    // at the deadline so a helper that hangs cannot hold the fetch.
    asio::steady_timer watchdog(executor);
    watchdog.expires_at(deadline);
    watchdog.async_wait([pipes, pid = child.pid](boost::system::error_code ec) {
      if (ec) return;
      ::kill(-pid, SIGKILL);  // the child is not reaped before the deadline: pid is still its
      boost::system::error_code ignored;
      pipes->out.close(ignored);
      pipes->err.close(ignored);
    });
    co_await (drain(pipes->out, stdout_text, kMaxStdout, out_overflow) &&
              drain(pipes->err, stderr_text, kMaxStderrLogged, err_overflow));
    const auto [status, killed_by_reap] = co_await reap(child.pid, deadline);
    watchdog.cancel();
    const bool timed_out = killed_by_reap || std::chrono::steady_clock::now() >= deadline;

    FetchResult result = interpret(program, status, timed_out, stdout_text, out_overflow);
    log_stderr(stderr_text, err_overflow, stdout_text, result);
    cleanse(stdout_text);
    cleanse(stderr_text);
    co_return result;
  }

 private:
  FetchResult interpret(const std::string& program, int status, bool timed_out,
                        const std::string& text, bool overflow) const {
    if (timed_out) {
      return fetch_failure(
          true, program + ": timed out after " + std::to_string(timeout_.count()) + " ms (killed)");
    }
    if (WIFSIGNALED(status)) {
      return fetch_failure(true,
                           program + ": killed by signal " + std::to_string(WTERMSIG(status)));
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      return fetch_failure(true,
                           program + ": exited with status " + std::to_string(WEXITSTATUS(status)));
    }
    if (overflow) {
      return fetch_failure(
          false, program + ": printed more than " + std::to_string(kMaxStdout) + " bytes");
    }
    boost::system::error_code ec;
    const boost::json::value json = boost::json::parse(text, ec);
    const boost::json::object* object = ec ? nullptr : json.if_object();
    const boost::json::value* token = object ? object->if_contains("token") : nullptr;
    if (token == nullptr || !token->is_string() || token->as_string().empty()) {
      // Never quote the output: it may be a token in the wrong shape.
      return fetch_failure(false, program +
                                      ": expected a JSON object with a non-empty \"token\" "
                                      "string on stdout");
    }
    const std::string_view value(token->as_string().data(), token->as_string().size());
    const auto printable =
        std::all_of(value.begin(), value.end(), [](char c) { return c > ' ' && c <= '~'; });
    if (!printable) {
      return fetch_failure(false, program + ": the token has spaces or control characters");
    }
    Fetched fetched;
    const TimePoint now = context_.clock();
    fetched.expires_at = now + ttl_;
    if (const boost::json::value* expires = object->if_contains("expires_at")) {
      const auto* text_value = expires->if_string();
      const auto parsed =
          text_value != nullptr
              ? parse_rfc3339(std::string_view(text_value->data(), text_value->size()))
              : std::nullopt;
      if (!parsed) {
        return fetch_failure(false, program + ": \"expires_at\" is not an RFC 3339 date-time");
      }
      if (*parsed <= now) return fetch_failure(true, program + ": printed an expired token");
      fetched.expires_at = *parsed;
    }
    fetched.value = SecretBytes(value);
    FetchResult out;
    out.token = std::move(fetched);
    return out;
  }

  // A failing helper's stderr goes to the log, bounded, with the token (if it printed one)
  // and anything shaped like the JSON it should have printed taken out.
  void log_stderr(const std::string& text, bool overflow, const std::string& stdout_text,
                  const FetchResult& result) const {
    if (text.empty() || !context_.log) return;
    std::vector<std::string> needles;
    if (result.token) needles.emplace_back(result.token->value.view());
    // A helper that failed may have printed its token in another shape: every long word of
    // its stdout counts as secret too.
    std::size_t start = std::string::npos;
    for (std::size_t i = 0; i <= stdout_text.size(); ++i) {
      const bool word =
          i < stdout_text.size() &&
          std::string_view(" \t\r\n\"'{}:,").find(stdout_text[i]) == std::string_view::npos;
      if (word && start == std::string::npos) start = i;
      if (!word && start != std::string::npos) {
        if (i - start >= 8) needles.push_back(stdout_text.substr(start, i - start));
        start = std::string::npos;
      }
    }
    Redactor redactor(std::move(needles));
    std::string line = redactor.redact(text);
    for (char& c : line) {
      if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = ' ';
    }
    context_.log("credential " + name_ + ": helper stderr" +
                 (result.token ? "" : " (failed: " + result.error.message + ")") + ": " + line +
                 (overflow ? " [truncated]" : ""));
  }

  std::string name_;
  std::vector<std::string> command_;
  std::chrono::milliseconds timeout_;
  std::chrono::seconds ttl_;
  ProviderContext context_;
};

}  // namespace

std::shared_ptr<Provider> make_exec_provider(const CredentialSpec& spec, ProviderContext context) {
  return std::make_shared<ExecProvider>(spec, std::move(context));
}

}  // namespace sandgate::secrets
