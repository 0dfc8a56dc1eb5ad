#include "proxy/descriptors.hpp"

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <boost/asio/error.hpp>
#include <boost/json.hpp>
#include <fstream>
#include <iostream>

namespace sandgate::proxy {

namespace {

telemetry::AcceptFailure classify(const boost::system::error_code& ec) {
  namespace error = boost::asio::error;
  if (ec == error::no_descriptors || ec == boost::system::errc::too_many_files_open_in_system) {
    return telemetry::AcceptFailure::descriptors;
  }
  if (ec == error::no_buffer_space || ec == error::no_memory) {
    return telemetry::AcceptFailure::memory;
  }
  return telemetry::AcceptFailure::other;
}

// The most a process may ask for: /proc/sys/fs/nr_open (1048576 by default).
rlim_t kernel_nr_open() {
  std::ifstream in("/proc/sys/fs/nr_open");
  unsigned long long n = 0;
  if (in >> n && n > 0) return static_cast<rlim_t>(n);
  return 1U << 20U;
}

// Process-wide rate limit of the accept_failed line, shared by every worker's listeners.
std::atomic<std::int64_t> last_accept_warning_ns{0};
std::atomic<std::uint64_t> accept_failures_unreported{0};

}  // namespace

std::size_t descriptors_needed(const config::Limits& limits, std::size_t fixed) {
  return 2 * limits.max_connections + limits.max_unauthenticated_connections + fixed;
}

std::size_t raise_descriptor_limit(std::size_t needed) {
  rlimit lim{};
  if (::getrlimit(RLIMIT_NOFILE, &lim) != 0) return 0;
  const rlim_t target = lim.rlim_max == RLIM_INFINITY ? kernel_nr_open() : lim.rlim_max;
  if (lim.rlim_cur == RLIM_INFINITY || lim.rlim_cur < target) {
    rlimit raised{target, lim.rlim_max};
    if (::setrlimit(RLIMIT_NOFILE, &raised) == 0) lim.rlim_cur = target;
  }
  const auto soft = static_cast<std::size_t>(lim.rlim_cur);
  if (lim.rlim_cur != RLIM_INFINITY && soft < needed) {
    const boost::json::object warning{
        {"event", "descriptor_limit_low"},
        {"limit", soft},
        {"needed", needed},
        {"message",
         "the descriptor limit (RLIMIT_NOFILE) is below what limits.max_connections and "
         "limits.max_unauthenticated_connections can hold open; past it, connections wait "
         "unaccepted and upstream dials fail with LOCAL_RESOURCES_EXHAUSTED. Raise the hard "
         "limit (LimitNOFILE= in systemd, --ulimit nofile= in docker) or lower those limits"}};
    std::cerr << boost::json::serialize(warning) << std::endl;
  }
  return soft;
}

void report_accept_failure(telemetry::Metrics& metrics, const boost::system::error_code& ec,
                           std::string_view listener) {
  const telemetry::AcceptFailure reason = classify(ec);
  metrics.accept_failure(reason);
  accept_failures_unreported.fetch_add(1);
  const std::int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                               std::chrono::steady_clock::now().time_since_epoch())
                               .count();
  std::int64_t last = last_accept_warning_ns.load();
  const std::int64_t interval =
      std::chrono::duration_cast<std::chrono::nanoseconds>(kAcceptWarningInterval).count();
  if (last != 0 && now - last < interval) return;
  if (!last_accept_warning_ns.compare_exchange_strong(last, now)) return;  // another thread
  const std::uint64_t failures = accept_failures_unreported.exchange(0);
  const boost::json::object line{{"event", "accept_failed"},
                                 {"listener", listener},
                                 {"reason", telemetry::name(reason)},
                                 {"error", ec.message()},
                                 {"failures", failures}};
  std::cerr << boost::json::serialize(line) << std::endl;
}

bool DescriptorReserve::take() {
  if (fd_ >= 0) return true;
  fd_ = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  return fd_ >= 0;
}

bool DescriptorReserve::release() {
  if (fd_ < 0) return false;
  ::close(fd_);
  fd_ = -1;
  return true;
}

}  // namespace sandgate::proxy
