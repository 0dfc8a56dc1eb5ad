#include "launcher/approver.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <boost/json.hpp>
#include <functional>
#include <iostream>

#include "http/client/event_stream.hpp"
#include "secrets/secret_file.hpp"

extern char** environ;

namespace sandgate::launcher {

namespace {

constexpr auto kConnectTimeout = std::chrono::seconds(3);
// The daemon writes at least a keep-alive every 15 s: a stream silent for three of them is
// broken, even when no error says so (a daemon stopped with SIGSTOP, a lost route).
constexpr auto kStreamIdle = std::chrono::seconds(45);
constexpr auto kAnswerTimeout = std::chrono::seconds(3);
constexpr auto kFirstBackoff = std::chrono::milliseconds(250);
constexpr auto kMaxBackoff = std::chrono::seconds(5);
constexpr std::size_t kMaxOutput = 4096;  // of CMD's stdout kept (the rest is read and dropped)

std::int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// How CMD ended: its exit status (nullopt: killed, or it could not be started) and what it
// wrote to stdout (at most kMaxOutput bytes).
struct CommandRun {
  std::optional<int> exit_code;
  std::string out;
  std::string error;  // it could not be started
};

// Runs `/bin/sh -c command` in a process group of its own, with stdin /dev/null and stdout
// read here, until it exits, `deadline` passes or `give_up` says so (asked every 50 ms; then
// its whole group is killed). The launcher is multithreaded: everything the child uses is made
// before the fork, and the child makes only async-signal-safe calls until the exec.
CommandRun run_command_line(const std::string& command, const std::vector<std::string>& env,
                            std::chrono::steady_clock::time_point deadline,
                            const std::function<bool()>& give_up) {
  CommandRun run;
  std::array<char*, 4> argv{const_cast<char*>("sh"), const_cast<char*>("-c"),
                            const_cast<char*>(command.c_str()), nullptr};
  std::vector<char*> envp;
  for (const std::string& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) {
    run.error = "pipe failed";
    return run;
  }
  const int null_in = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  const pid_t pid = null_in < 0 ? -1 : ::fork();
  if (pid == 0) {
    ::setpgid(0, 0);
    // The launcher blocks its stop signals and ignores SIGPIPE; CMD starts as a shell would.
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::signal(SIGPIPE, SIG_DFL);
    if (::dup2(null_in, 0) < 0 || ::dup2(out[1], 1) < 0) ::_exit(127);
    ::execve("/bin/sh", argv.data(), envp.data());
    ::_exit(127);
  }
  ::close(out[1]);
  if (null_in >= 0) ::close(null_in);
  if (pid < 0) {
    ::close(out[0]);
    run.error = "cannot start /bin/sh";
    return run;
  }
  ::setpgid(pid, pid);  // also here, so that the kill below finds the group whoever runs first
  bool reading = true;
  int status = 0;
  for (;;) {
    if (::waitpid(pid, &status, WNOHANG) == pid) break;
    if (give_up() || std::chrono::steady_clock::now() >= deadline) {
      ::kill(-pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      break;
    }
    if (!reading) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      continue;
    }
    pollfd p{out[0], POLLIN, 0};
    if (::poll(&p, 1, 50) <= 0) continue;
    char buffer[1024];
    const ssize_t n = ::read(out[0], buffer, sizeof buffer);
    if (n <= 0) {
      reading = n < 0 && errno == EINTR;
      continue;
    }
    const std::size_t room = kMaxOutput - std::min(kMaxOutput, run.out.size());
    run.out.append(buffer, std::min(room, static_cast<std::size_t>(n)));
  }
  // What it wrote just before it exited.
  for (char buffer[1024]; reading && run.out.size() < kMaxOutput;) {
    pollfd p{out[0], POLLIN, 0};
    if (::poll(&p, 1, 0) <= 0) break;
    const ssize_t n = ::read(out[0], buffer, sizeof buffer);
    if (n <= 0) break;
    run.out.append(buffer, std::min(kMaxOutput - run.out.size(), static_cast<std::size_t>(n)));
  }
  ::close(out[0]);
  if (WIFEXITED(status)) run.exit_code = WEXITSTATUS(status);
  return run;
}

}  // namespace

std::optional<HeldDestination> parse_held(std::string_view data) {
  boost::system::error_code ec;
  const boost::json::value parsed = boost::json::parse(data, ec);
  const boost::json::object* o = ec ? nullptr : parsed.if_object();
  if (o == nullptr) return std::nullopt;
  const auto text = [&](std::string_view key) -> std::optional<std::string> {
    const boost::json::value* v = o->if_contains(key);
    if (v == nullptr || !v->is_string()) return std::nullopt;
    return std::string(v->as_string());
  };
  const auto number = [&](std::string_view key) -> std::optional<std::int64_t> {
    const boost::json::value* v = o->if_contains(key);
    if (v == nullptr) return std::nullopt;
    if (v->is_int64()) return v->as_int64();
    if (v->is_uint64() && v->as_uint64() <= INT64_MAX) return v->as_uint64();
    return std::nullopt;
  };
  const auto id = number("id");
  const auto port = number("port");
  const auto since = number("since_ms");
  auto sandbox = text("sandbox");
  auto host = text("host");
  if (!id || *id <= 0 || !port || *port < 0 || *port > 65535 || !since || !sandbox || !host) {
    return std::nullopt;
  }
  HeldDestination h;
  h.id = static_cast<std::uint64_t>(*id);
  h.sandbox = std::move(*sandbox);
  h.host = std::move(*host);
  h.port = static_cast<std::uint16_t>(*port);
  h.mode = text("mode").value_or("");
  h.method = text("method").value_or("");
  h.path = text("path").value_or("");
  h.since_ms = *since;
  return h;
}

std::vector<std::string> hold_environment(std::vector<std::string> base, const HeldDestination& h) {
  const std::pair<std::string_view, std::string> set[] = {
      {"SANDGATE_HOLD_ID", std::to_string(h.id)},
      {"SANDGATE_SANDBOX", h.sandbox},
      {"SANDGATE_HOST", h.host},
      {"SANDGATE_PORT", std::to_string(h.port)},
      {"SANDGATE_MODE", h.mode},
      {"SANDGATE_METHOD", h.method},
      {"SANDGATE_PATH", h.path},
  };
  std::erase_if(base, [&](const std::string& entry) {
    return std::any_of(std::begin(set), std::end(set), [&](const auto& s) {
      return entry.size() > s.first.size() && entry.starts_with(s.first) &&
             entry[s.first.size()] == '=';
    });
  });
  for (const auto& [name, value] : set) base.push_back(std::string(name) + "=" + value);
  return base;
}

HoldVerdict verdict_of(std::optional<int> exit_code, std::string_view out) {
  if (exit_code == 0) return {"allow_once", ""};
  if (exit_code == 3) return {"allow_sandbox", ""};
  std::string message;
  for (const char c : out.substr(0, out.find('\n'))) {
    if (message.size() == kMaxMessage) break;
    if (c == '\r') continue;
    message += c >= 0x20 && c < 0x7f ? c : '?';
  }
  return {"deny", message};
}

std::chrono::milliseconds time_left(std::int64_t since_ms, std::int64_t now,
                                    std::chrono::milliseconds hold_timeout) {
  const std::int64_t left = since_ms + hold_timeout.count() - now;
  return std::chrono::milliseconds(std::clamp<std::int64_t>(left, 0, hold_timeout.count()));
}

ApproverSettings approver_settings(const Settings& settings, const std::string& command,
                                   const std::string& sandbox) {
  const std::string& file = settings.admin_token_file;
  if (file.empty()) {
    throw LaunchError(2,
                      "--approve-with answers holds on the admin API, which needs "
                      "listeners.admin_token_file in " +
                          settings.config_path);
  }
  struct stat st {};
  const uid_t owner = ::geteuid() == 0 && ::stat(file.c_str(), &st) == 0 ? st.st_uid : ::geteuid();
  const secrets::AdminToken token = secrets::read_admin_token(file, owner);
  if (!token.file.ok()) throw LaunchError(2, "--approve-with: " + token.file.error);
  if (token.value().empty()) throw LaunchError(2, "--approve-with: " + file + " is empty");
  ApproverSettings a;
  a.command = command;
  a.sandbox = sandbox;
  a.admin_host = settings.admin_host;
  a.admin_port = settings.admin_port;
  a.token = std::string(token.value());
  a.hold_timeout = settings.hold_timeout;
  for (char** e = environ; *e != nullptr; ++e) a.environment.emplace_back(*e);
  return a;
}

Approver::Approver(ApproverSettings settings) : settings_(std::move(settings)) {
  for (std::size_t i = 0; i < kConcurrent; ++i) workers_.emplace_back([this] { work(); });
  follower_ = std::thread([this] { follow(); });
}

Approver::~Approver() {
  {
    const std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  stream_.stop();
  changed_.notify_all();
  follower_.join();
  for (std::thread& t : workers_) t.join();
}

void Approver::warn(const std::string& message) {
  static std::mutex output;
  const std::lock_guard lock(output);
  std::cerr << "sandgate-launch: --approve-with: " + message + "\n";
}

// Follows GET /holds/events?sandbox=ID until stopped; a broken stream is opened again, after
// a backoff that doubles up to kMaxBackoff (reset once a stream delivered something).
void Approver::follow() {
  auto backoff = std::chrono::milliseconds(kFirstBackoff);
  bool told = false;  // the last break was reported (one line per outage, not per attempt)
  while (!stopping_) {
    std::uint64_t connection = 0;
    {
      const std::lock_guard lock(mutex_);
      connection = ++connection_;
      jobs_.clear();  // holds of an earlier stream come again on this one, if still pending
      ended_.clear();
    }
    http::EventStreamReader reader;
    http::PlainRequest request;
    request.target = "/holds/events?sandbox=" + settings_.sandbox;
    request.fields = {{"Accept", "text/event-stream"}};
    const http::PlainAnswer ended =
        stream_.run(settings_.admin_host, settings_.admin_port, request, kConnectTimeout,
                    kStreamIdle, [&](std::string_view bytes) {
                      backoff = kFirstBackoff;
                      told = false;
                      for (const http::ServerEvent& e : reader.feed(bytes)) {
                        if (e.event == "held") on_held(e.data, connection);
                        if (e.event == "answered") on_answered(e.data);
                      }
                    });
    if (stopping_) return;
    if (!told) {
      warn("the daemon's hold stream (" + settings_.admin_host + ":" +
           std::to_string(settings_.admin_port) + ") " +
           (ended.status != 0 && ended.status != 200
                ? "answered " + std::to_string(ended.status)
                : "ended" + (ended.error.empty() ? std::string() : ": " + ended.error)) +
           "; trying again while the command runs");
      told = true;
    }
    std::unique_lock lock(mutex_);
    changed_.wait_for(lock, backoff, [this] { return stopping_.load(); });
    backoff = std::min<std::chrono::milliseconds>(backoff * 2, kMaxBackoff);
  }
}

void Approver::on_held(std::string_view data, std::uint64_t connection) {
  std::optional<HeldDestination> hold = parse_held(data);
  if (!hold || hold->sandbox != settings_.sandbox) return;
  {
    const std::lock_guard lock(mutex_);
    if (jobs_.size() >= kMaxWaiting) return;  // it expires unanswered
    jobs_.push_back({connection, std::move(*hold)});
  }
  changed_.notify_one();
}

// A hold ended (answered by someone else, expired, or by this launcher): its command, if one
// runs, is stopped; if it waits its turn, it is not asked.
void Approver::on_answered(std::string_view data) {
  boost::system::error_code ec;
  const boost::json::value parsed = boost::json::parse(data, ec);
  const boost::json::value* id =
      !ec && parsed.is_object() ? parsed.as_object().if_contains("id") : nullptr;
  if (id == nullptr || !id->is_int64() || id->as_int64() <= 0) return;
  const auto hold = static_cast<std::uint64_t>(id->as_int64());
  const std::lock_guard lock(mutex_);
  std::erase_if(jobs_, [&](const Job& j) { return j.hold.id == hold; });
  if (running_.contains(hold)) ended_.insert(hold);
}

void Approver::work() {
  for (;;) {
    Job job;
    {
      std::unique_lock lock(mutex_);
      changed_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
      if (stopping_) return;
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    const auto left = time_left(job.hold.since_ms, now_ms(), settings_.hold_timeout);
    if (left.count() == 0) continue;  // expired while it waited its turn
    {
      const std::lock_guard lock(mutex_);
      if (job.connection != connection_) continue;
      running_.insert(job.hold.id);
    }
    // Moot once the hold ended otherwise (an operator answered it, it expired) or its stream
    // broke: a hold's id names it only on the stream it came from (the daemon may have
    // restarted since), and one still pending comes again on the new stream.
    const auto moot = [&] {
      const std::lock_guard lock(mutex_);
      return stopping_ || job.connection != connection_ || ended_.contains(job.hold.id);
    };
    const CommandRun ran =
        run_command_line(settings_.command, hold_environment(settings_.environment, job.hold),
                         std::chrono::steady_clock::now() + left, moot);
    const bool gone = moot();
    {
      const std::lock_guard lock(mutex_);
      running_.erase(job.hold.id);
      ended_.erase(job.hold.id);
    }
    if (stopping_) return;
    if (!ran.error.empty()) warn("hold " + std::to_string(job.hold.id) + ": " + ran.error);
    if (!gone) answer(job.hold, verdict_of(ran.exit_code, ran.out));
  }
}

void Approver::answer(const HeldDestination& hold, const HoldVerdict& verdict) {
  boost::json::object body{{"action", verdict.action}};
  if (!verdict.message.empty()) body["message"] = verdict.message;
  http::PlainRequest request;
  request.method = "POST";
  request.target = "/holds/" + std::to_string(hold.id);
  request.fields = {{"Authorization", "Bearer " + settings_.token},
                    {"Content-Type", "application/json"}};
  request.body = boost::json::serialize(body);
  const http::PlainAnswer answered = http::plain_exchange(
      settings_.admin_host, settings_.admin_port, std::move(request), kAnswerTimeout);
  // 404: answered by someone else, or expired meanwhile; nothing to say.
  if (answered.status == 200 || answered.status == 404) return;
  warn("hold " + std::to_string(hold.id) + " (" + hold.host + "): the daemon did not take the " +
       verdict.action + ": " +
       (answered.status == 0 ? answered.error : "status " + std::to_string(answered.status)));
}

}  // namespace sandgate::launcher
