#include "support/subprocess.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <stdexcept>

#include "support/temp_dir.hpp"

namespace sandgate::test {

namespace {

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

int decode_status(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

}  // namespace

CommandResult run_command(const std::vector<std::string>& argv, std::chrono::milliseconds timeout,
                          const std::string& stdin_data) {
  if (argv.empty()) throw std::invalid_argument("run_command: empty argv");
  int in[2], out[2], err[2];
  if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0) {
    throw std::runtime_error("pipe2 failed");
  }
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);

  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);
    ::dup2(in[0], STDIN_FILENO);
    ::dup2(out[1], STDOUT_FILENO);
    ::dup2(err[1], STDERR_FILENO);
    ::execvp(args[0], args.data());
    ::_exit(127);
  }
  ::close(in[0]);
  ::close(out[1]);
  ::close(err[1]);
  int to_child = in[1];
  int from_out = out[0];
  int from_err = err[0];
  ::fcntl(to_child, F_SETFL, O_NONBLOCK);

  CommandResult result;
  std::size_t written = 0;
  if (stdin_data.empty()) close_fd(to_child);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::array<char, 65536> buf;
  while (from_out >= 0 || from_err >= 0) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      result.timed_out = true;
      ::kill(pid, SIGKILL);
      break;
    }
    std::array<pollfd, 3> fds{
        {{from_out, POLLIN, 0}, {from_err, POLLIN, 0}, {to_child, POLLOUT, 0}}};
    const int n = ::poll(fds.data(), fds.size(), static_cast<int>(left.count()));
    if (n < 0 && errno != EINTR) break;
    for (int i = 0; i < 2; ++i) {
      if (fds[static_cast<std::size_t>(i)].fd < 0 ||
          fds[static_cast<std::size_t>(i)].revents == 0) {
        continue;
      }
      int& fd = i == 0 ? from_out : from_err;
      const ssize_t r = ::read(fd, buf.data(), buf.size());
      if (r > 0) {
        (i == 0 ? result.out : result.err).append(buf.data(), static_cast<std::size_t>(r));
      } else if (r == 0 || (errno != EINTR && errno != EAGAIN)) {
        close_fd(fd);
      }
    }
    if (to_child >= 0 && fds[2].revents != 0) {
      const ssize_t w = ::write(to_child, stdin_data.data() + written, stdin_data.size() - written);
      if (w > 0) written += static_cast<std::size_t>(w);
      if ((w < 0 && errno != EAGAIN && errno != EINTR) || written == stdin_data.size()) {
        close_fd(to_child);
      }
    }
  }
  close_fd(to_child);
  close_fd(from_out);
  close_fd(from_err);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  result.exit_code = decode_status(status);
  return result;
}

CurlResult run_curl(const std::vector<std::string>& args, std::chrono::milliseconds timeout) {
  TempDir dir;
  const std::string headers = dir.file("headers");
  const std::string body = dir.file("body");
  std::vector<std::string> argv{"curl",
                                "-q",
                                "-sS",
                                "--noproxy",
                                "",
                                "-D",
                                headers,
                                "-o",
                                body,
                                "-w",
                                "%{http_code} %{http_connect} %{time_total}"};
  argv.insert(argv.end(), args.begin(), args.end());
  const CommandResult r = run_command(argv, timeout);
  CurlResult out;
  out.exit_code = r.timed_out ? -1 : r.exit_code;
  out.err = r.err;
  out.headers = read_file(headers);
  out.body = read_file(body);
  const auto space = r.out.find(' ');
  try {
    out.http_code = std::stoi(r.out.substr(0, space));
    if (space != std::string::npos) {
      const auto second = r.out.find(' ', space + 1);
      out.connect_code = std::stoi(r.out.substr(space + 1));
      if (second != std::string::npos) out.seconds = std::stod(r.out.substr(second + 1));
    }
  } catch (const std::exception&) {
  }
  return out;
}

}  // namespace sandgate::test
