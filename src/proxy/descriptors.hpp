#pragma once

#include <boost/system/error_code.hpp>
#include <chrono>
#include <cstddef>
#include <string_view>

#include "config/config.hpp"
#include "telemetry/metrics.hpp"

namespace sandgate::proxy {

// File descriptors: the daemon's budget of them and what it does when they run out.

// Descriptors the limits can hold open at once: two per connection (client and upstream), one
// per unauthenticated connection, plus `fixed` for listeners, event loops and resolvers.
// Tunnels moving bulk data also hold two pipes (four descriptors) each while they splice;
// that is not counted, as few tunnels splice at once.
std::size_t descriptors_needed(const config::Limits& limits, std::size_t fixed);

// At start: raises the soft RLIMIT_NOFILE to the hard one (the kernel's nr_open when the hard
// one is unlimited), and prints {"event":"descriptor_limit_low",...} on stderr when the limit
// is still below `needed`. Returns the soft limit in force.
std::size_t raise_descriptor_limit(std::size_t needed);

// Counts a failed accept(2) (sandgate_accept_failures_total{reason}) and, at most once per
// kAcceptWarningInterval for the whole process, prints {"event":"accept_failed",...} on
// stderr with the listener, the error and the failures since the previous line. Thread-safe.
void report_accept_failure(telemetry::Metrics& metrics, const boost::system::error_code& ec,
                           std::string_view listener);
inline constexpr std::chrono::seconds kAcceptWarningInterval{10};
// A listener whose accept(2) failed waits this long before it tries again (no busy loop
// while out of descriptors; a connection waiting in the backlog is taken this soon after a
// descriptor is free).
inline constexpr std::chrono::milliseconds kAcceptBackoff{50};

// One descriptor held open (on /dev/null) so that a listener which must keep answering
// (the admin listener: /healthz, /metrics) can still accept when the process is out of
// them: release() frees it just before that accept, take() gets it back once the admin
// connection is closed. Owned by one coroutine; not thread-safe.
class DescriptorReserve {
 public:
  DescriptorReserve() { take(); }
  ~DescriptorReserve() { release(); }
  DescriptorReserve(const DescriptorReserve&) = delete;
  DescriptorReserve& operator=(const DescriptorReserve&) = delete;

  // Opens the reserve if it is not held; false when no descriptor is free.
  bool take();
  // Closes the reserve; false if it was not held.
  bool release();

 private:
  int fd_ = -1;
};

}  // namespace sandgate::proxy
