#pragma once

// What the end-to-end tests (sandbox_e2e_test, sandbox_credentials_e2e_test) share: the real
// binaries' paths, commands that must succeed, servers in the test internet, a thread in
// another network namespace, and the daemon's audit lines since a test began. Each binary defines
// SANDGATE_DEFAULT_LAUNCH_BIN and SANDGATE_DEFAULT_SOURCE_DIR.

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/json/object.hpp>
#include <chrono>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "support/json_helpers.hpp"
#include "support/sandgate_process.hpp"
#include "support/subprocess.hpp"

namespace sandgate::test {

inline std::string launch_binary() {
  const char* env = std::getenv("SANDGATE_LAUNCH_BIN");
  return env ? env : SANDGATE_DEFAULT_LAUNCH_BIN;
}

inline std::string source_dir() {
  const char* env = std::getenv("SANDGATE_SOURCE_DIR");
  return env ? env : SANDGATE_DEFAULT_SOURCE_DIR;
}

inline std::string read_all(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Runs `argv`; throws std::runtime_error with its output unless it exits 0.
inline CommandResult must(const std::vector<std::string>& argv) {
  CommandResult r = run_command(argv, std::chrono::seconds(30));
  if (r.exit_code != 0) {
    std::string line;
    for (const auto& a : argv) line += a + " ";
    throw std::runtime_error(line + "failed: " + r.err + r.out);
  }
  return r;
}

// A background process (a server in the test internet), killed and reaped at the end; its
// stdout and stderr appended to `output`.
class Background {
 public:
  Background(const std::vector<std::string>& argv, const std::string& output) {
    std::vector<std::string> args = argv;
    std::vector<char*> raw;
    for (auto& a : args) raw.push_back(a.data());
    raw.push_back(nullptr);
    pid_ = ::fork();
    if (pid_ == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive the test
      const int fd = ::open(output.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
      ::dup2(fd, STDOUT_FILENO);
      ::dup2(fd, STDERR_FILENO);
      ::execvp(raw[0], raw.data());
      ::_exit(127);
    }
  }
  ~Background() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  Background(const Background&) = delete;
  Background& operator=(const Background&) = delete;

 private:
  pid_t pid_ = -1;
};

// Runs `fn` on a thread that entered the named network namespace: what it opens there (a
// listening socket, and the thread an HttpOrigin starts) stays there.
template <class F>
void in_netns(const std::string& name, F&& fn) {
  std::exception_ptr error;
  std::thread thread([&] {
    const int fd = ::open(("/run/netns/" + name).c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0 || ::setns(fd, CLONE_NEWNET) != 0) {
      error = std::make_exception_ptr(std::runtime_error("cannot enter netns " + name));
      if (fd >= 0) ::close(fd);
      return;
    }
    ::close(fd);
    try {
      fn();
    } catch (...) {
      error = std::current_exception();
    }
  });
  thread.join();
  if (error) std::rethrow_exception(error);
}

// The daemon's audit lines from the `from`-th on whose event.code is `code`.
inline std::vector<boost::json::object> audit_lines_since(const SandgateProcess& daemon,
                                                          std::size_t from,
                                                          const std::string& code) {
  std::vector<boost::json::object> out;
  const auto lines = daemon.audit_lines();
  for (std::size_t i = from; i < lines.size(); ++i) {
    if (json_string(lines[i], "event.code") == code) out.push_back(lines[i]);
  }
  return out;
}

}  // namespace sandgate::test
