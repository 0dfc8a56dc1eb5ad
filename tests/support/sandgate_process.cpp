#include "support/sandgate_process.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/json/array.hpp>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "gtest/gtest.h"
#include "support/eventually.hpp"
#include "support/json_helpers.hpp"
#include "support/metrics_text.hpp"
#include "support/raw_client.hpp"

namespace sandgate::test {

namespace {

std::uint16_t port_of(std::string_view endpoint) {
  const auto colon = endpoint.rfind(':');
  if (colon == std::string_view::npos) return 0;
  return static_cast<std::uint16_t>(std::stoul(std::string(endpoint.substr(colon + 1))));
}

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> out;
  std::size_t pos = 0;
  for (;;) {
    const auto nl = text.find('\n', pos);
    if (nl == std::string::npos) break;  // a partial last line is not a line yet
    out.push_back(text.substr(pos, nl - pos));
    pos = nl + 1;
  }
  return out;
}

}  // namespace

std::string sandgate_binary() {
  const char* bin = std::getenv("SANDGATE_BIN");
  if (bin && *bin) return bin;
#ifdef SANDGATE_DEFAULT_BIN
  return SANDGATE_DEFAULT_BIN;  // the build's own binary, when run outside CTest
#else
  throw std::runtime_error("SANDGATE_BIN is not set");
#endif
}

SandgateProcess::SandgateProcess(SandgateOptions options) : options_(std::move(options)) {
  config_path_ = dir_.file("sandgate.toml");
  audit_path_ = !options_.audit_path.empty() ? options_.audit_path
                : options_.audit_to_file     ? dir_.file("audit.log")
                                             : dir_.file("stdout.log");
  stderr_path_ = dir_.file("stderr.log");
  dir_.write("sandgate.toml", render(options_.tables));
  const std::string bin = sandgate_binary();
  const std::string stdout_path = dir_.file("stdout.log");  // no allocation after fork()

  // argv built before fork(): no allocation in the child.
  std::vector<std::string> args = options_.wrapper;
  for (const char* a : {bin.c_str(), "--config", config_path_.c_str()}) args.emplace_back(a);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  int pipe_fds[2] = {-1, -1};
  if (options_.stdout_pipe && ::pipe2(pipe_fds, O_CLOEXEC) != 0) {
    throw std::runtime_error("pipe2 failed");
  }
  const pid_t parent = ::getpid();
  pid_ = ::fork();
  if (pid_ < 0) throw std::runtime_error("fork failed");
  if (pid_ == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive the test
    if (::getppid() != parent) ::_exit(127);
    const int out = pipe_fds[1] >= 0
                        ? pipe_fds[1]
                        : ::open(stdout_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    const int err = ::open(stderr_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    const int null = ::open("/dev/null", O_RDONLY);
    if (out < 0 || err < 0 || null < 0) ::_exit(126);
    ::dup2(null, STDIN_FILENO);
    ::dup2(out, STDOUT_FILENO);
    ::dup2(err, STDERR_FILENO);
    ::execvp(argv[0], argv.data());
    ::_exit(127);
  }
  if (pipe_fds[1] >= 0) {
    ::close(pipe_fds[1]);
    stdout_pipe_ = pipe_fds[0];
  }

  const auto deadline = std::chrono::steady_clock::now() + options_.ready_timeout;
  for (;;) {
    for (const std::string& line : split_lines(read_file(stderr_path_))) {
      const auto ready = parse_object(line);
      if (!ready || json_string(*ready, "event") != "ready") continue;
      if (const auto* eps = json_at(*ready, "explicit"); eps && eps->is_array()) {
        const auto& arr = eps->as_array();
        if (!arr.empty() && arr[0].is_string()) explicit_port_ = port_of(arr[0].as_string());
      }
      if (const auto admin = json_string(*ready, "admin")) admin_port_ = port_of(*admin);
      if (explicit_port_ == 0) {
        stop(std::chrono::milliseconds(500));
        throw std::runtime_error("ready line without a port: " + line);
      }
      return;
    }
    if (!alive()) {
      throw std::runtime_error("sandgate exited with " + std::to_string(exit_code_) +
                               " before it was ready; stderr:\n" + stderr_text() + "\nconfig:\n" +
                               read_file(config_path_));
    }
    if (std::chrono::steady_clock::now() > deadline) {
      stop(std::chrono::milliseconds(500));
      throw std::runtime_error("sandgate did not print a ready line; stderr:\n" + stderr_text());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

SandgateProcess::~SandgateProcess() {
  struct ClosePipe {
    int fd;
    ~ClosePipe() {
      if (fd >= 0) ::close(fd);
    }
  } close_pipe{stdout_pipe_};  // last, after the daemon is stopped
  if (pid_ <= 0) return;
  if (!stopped_by_us_ && !alive()) {
    ADD_FAILURE() << "sandgate died during the test (exit code " << exit_code_
                  << ", 128+N = signal N); stderr:\n"
                  << stderr_text();
    return;
  }
  const std::string metrics = metrics_text();
  const auto internal =
      metric_value(metrics, "sandgate_errors_total", {{"code", "INTERNAL_ERROR"}});
  if (internal && *internal > 0) {
    ADD_FAILURE() << "sandgate counted " << *internal
                  << " INTERNAL_ERROR(s): an exception escaped a session";
  }
  stop(std::chrono::milliseconds(1500));
}

bool SandgateProcess::wait_no_connections(std::chrono::milliseconds timeout) const {
  return eventually(
      [&] { return metric_value(metrics_text(), "sandgate_active_connections") == 0.0; }, timeout,
      std::chrono::milliseconds(20));
}

std::string SandgateProcess::metrics_text() const {
  if (admin_port_ == 0) return {};
  try {
    RawClient c(admin_port_);
    c.send("GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
    const auto r = c.read_response(std::chrono::milliseconds(3000));
    return r && r->status == 200 ? r->body : std::string();
  } catch (const std::exception&) {
    return {};
  }
}

std::string SandgateProcess::render(const std::string& tables) const {
  std::ostringstream toml;
  toml << "workers = " << options_.workers << "\n"
       << "sandboxes_dir = \"" << options_.sandboxes_dir << "\"\n\n"
       << "[listeners]\n"
       << "explicit = [\"" << options_.explicit_listen << "\"]\n"
       << "admin = \"" << options_.admin_listen << "\"\n"
       << options_.listeners << "\n\n"
       << "[log]\n"
       << "audit = \""
       << (options_.audit_to_file || !options_.audit_path.empty() ? audit_path_
                                                                  : std::string("stdout"))
       << "\"\n"
       << options_.log << "\n\n"
       << tables << "\n";
  return toml.str();
}

std::string SandgateProcess::proxy_url(const std::string& id, const std::string& token) const {
  return "http://" + id + ":" + token + "@127.0.0.1:" + std::to_string(explicit_port_);
}

bool SandgateProcess::reload(const std::string& tables, std::string* error) {
  auto count_events = [this](std::string_view name) {
    std::size_t n = 0;
    for (const auto& line : split_lines(stderr_text())) {
      const auto o = parse_object(line);
      if (o && json_string(*o, "event") == name) ++n;
    }
    return n;
  };
  const std::size_t reloaded = count_events("reloaded");
  const std::size_t failed = count_events("reload_failed");
  dir_.write("sandgate.toml", render(tables));
  ::kill(pid_, SIGHUP);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (std::chrono::steady_clock::now() < deadline) {
    if (count_events("reloaded") > reloaded) return true;
    if (count_events("reload_failed") > failed) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (error) *error = stderr_text() + "\n" + thread_states();
  return false;
}

// For a failure report: each of the daemon's threads as the kernel sees it (state, what it
// waits in, its pending, blocked and caught signals), so that a signal that was not acted on
// can be told from one that was never delivered.
std::string SandgateProcess::thread_states() const {
  std::ostringstream out;
  const std::string proc = "/proc/" + std::to_string(pid_);
  out << "daemon threads (" << proc << "/task):\n";
  std::error_code ec;
  for (const auto& task : std::filesystem::directory_iterator(proc + "/task", ec)) {
    const std::string dir = task.path().string();
    out << "  " << task.path().filename().string() << " wchan=" << read_file(dir + "/wchan");
    for (const auto& line : split_lines(read_file(dir + "/status"))) {
      for (const char* key : {"Name:", "State:", "SigPnd:", "ShdPnd:", "SigBlk:", "SigCgt:"}) {
        if (line.rfind(key, 0) == 0) out << " " << line;
      }
    }
    out << "\n";
  }
  if (ec) out << "  (cannot list: " << ec.message() << ")\n";
  return out.str();
}

bool SandgateProcess::alive() {
  if (pid_ <= 0) return false;
  if (exit_code_ >= 0) return false;
  int status = 0;
  const pid_t r = ::waitpid(pid_, &status, WNOHANG);
  if (r == 0) return true;
  if (r == pid_) {
    exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  return false;
}

void SandgateProcess::kill_now() {
  if (pid_ <= 0 || !alive()) return;
  stopped_by_us_ = true;
  ::kill(pid_, SIGKILL);
  int status = 0;
  while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  exit_code_ = 128 + SIGKILL;
}

int SandgateProcess::stop(std::chrono::milliseconds grace) {
  if (pid_ <= 0) return exit_code_;
  stopped_by_us_ = true;
  if (!alive()) return exit_code_;
  ::kill(pid_, SIGTERM);
  const auto deadline = std::chrono::steady_clock::now() + grace;
  while (alive()) {
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid_, SIGKILL);
      int status = 0;
      while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
      }
      exit_code_ = 128 + SIGKILL;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return exit_code_;
}

std::string SandgateProcess::audit_text() const {
  if (!options_.audit_path.empty()) {
    // The daemon's own view of the path (its mount namespace): readable while it runs.
    return read_file("/proc/" + std::to_string(pid_) + "/root" + audit_path_);
  }
  return read_file(audit_path_);
}

std::string SandgateProcess::stderr_text() const {
  return read_file(stderr_path_);
}

std::vector<boost::json::object> SandgateProcess::audit_lines() const {
  std::vector<boost::json::object> out;
  for (const std::string& line : split_lines(audit_text())) {
    auto o = parse_object(line);
    if (!o) {
      ADD_FAILURE() << "audit line is not a JSON object: " << line;
      continue;
    }
    out.push_back(std::move(*o));
  }
  return out;
}

std::optional<boost::json::object> SandgateProcess::wait_audit(
    const std::function<bool(const boost::json::object&)>& pred, std::chrono::milliseconds timeout,
    std::size_t from) const {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    const auto lines = audit_lines();
    for (std::size_t i = from; i < lines.size(); ++i) {
      if (pred(lines[i])) return lines[i];
    }
    if (std::chrono::steady_clock::now() > deadline) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

std::optional<boost::json::object> SandgateProcess::wait_audit_code(
    const std::string& code, const std::string& reason, std::chrono::milliseconds timeout) const {
  return wait_audit(
      [&](const boost::json::object& o) {
        return json_string(o, "event.code") == code &&
               (reason.empty() || json_string(o, "event.reason") == reason);
      },
      timeout);
}

}  // namespace sandgate::test
