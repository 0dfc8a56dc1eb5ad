#pragma once

#include <array>
#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <memory>

#include "common/errc.hpp"
#include "policy/address_set.hpp"

namespace sandgate::proxy {

// Every address assigned to an interface of this host (its network namespace) right now.
Result<policy::AddressSet> read_host_addresses();

// Keeps `target` holding the host's own addresses (THREATS 28). Subscribes to the kernel's
// address notifications (rtnetlink RTMGRP_IPV4_IFADDR and RTMGRP_IPV6_IFADDR) first, then
// reads every address, so no change falls between the two; after each burst of
// notifications it reads them all again (getifaddrs) and publishes the new set whole with
// one atomic store, so the dial path reads it with no lock and no system call. A lost
// notification (the socket overran) also triggers a read. Between the kernel adding an
// address and the store there is a short window; the launcher's pool is refused by the
// policy itself, so sandbox links never depend on it.
//
// Runs on the io_context given (the daemon's main thread), which must outlive it. Writes a
// {"event":"host_addresses","count":N} line to stderr whenever the set changes.
class HostAddressWatch {
 public:
  using Target = std::atomic<std::shared_ptr<const policy::AddressSet>>;

  // Throws std::system_error (or Boost's) when the notification socket cannot be opened or the
  // first read fails: the daemon does not start without knowing its own addresses.
  HostAddressWatch(boost::asio::io_context& ioc, Target& target);
  HostAddressWatch(const HostAddressWatch&) = delete;
  HostAddressWatch& operator=(const HostAddressWatch&) = delete;

 private:
  void wait();
  void drain_and_refresh();
  void publish(policy::AddressSet set);

  boost::asio::posix::stream_descriptor socket_;
  Target& target_;
  alignas(8) std::array<char, 8192> buffer_;
};

}  // namespace sandgate::proxy
