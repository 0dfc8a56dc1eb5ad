#include "launcher/status_sink.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <iostream>

#include "launcher/sandbox.hpp"
#include "launcher/state.hpp"

namespace sandgate::launcher {
namespace fs = std::filesystem;

StatusSink::StatusSink(bool enabled, std::string json_file, int json_fd)
    : enabled_(enabled), file_(std::move(json_file)) {
  if (!enabled_) return;
  fd_ = json_fd >= 0 ? json_fd : (file_.empty() ? STDOUT_FILENO : -1);
  if (fd_ > STDERR_FILENO) {
    const int flags = ::fcntl(fd_, F_GETFD);
    if (flags < 0) {
      throw LaunchError(2, "--json-fd " + std::to_string(fd_) + " is not an open descriptor");
    }
    ::fcntl(fd_, F_SETFD, flags | FD_CLOEXEC);
  }
  if (!file_.empty()) {
    std::error_code ec;
    if (!fs::is_directory(fs::absolute(file_, ec).parent_path(), ec)) {
      throw LaunchError(2, "--json-file " + file_ + ": its directory does not exist");
    }
  }
}

void StatusSink::write(const RunOutcome& outcome) const {
  if (!enabled_) return;
  const std::string line = outcome_json(outcome);
  if (!file_.empty()) {
    try {
      write_file_atomically(file_, line, 0600);
    } catch (const std::runtime_error& e) {
      std::cerr << "sandgate-launch: --json-file: " << e.what() << "\n";
    }
    return;
  }
  std::cout.flush();
  for (std::size_t done = 0; done < line.size();) {
    const ssize_t n = ::write(fd_, line.data() + done, line.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += static_cast<std::size_t>(n);
  }
}

}  // namespace sandgate::launcher
