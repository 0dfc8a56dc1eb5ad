#include "proxy/host_addresses.hpp"

#include <ifaddrs.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/system/system_error.hpp>
#include <cerrno>
#include <cstring>
#include <iostream>
#include <system_error>
#include <vector>

namespace sandgate::proxy {

namespace {

// A non-blocking rtnetlink socket subscribed to address changes of both families.
int open_address_notifications() {
  const int fd = ::socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK, NETLINK_ROUTE);
  if (fd < 0) throw std::system_error(errno, std::generic_category(), "netlink socket");
  sockaddr_nl local{};
  local.nl_family = AF_NETLINK;
  local.nl_groups = RTMGRP_IPV4_IFADDR | RTMGRP_IPV6_IFADDR;
  if (::bind(fd, reinterpret_cast<const sockaddr*>(&local), sizeof local) != 0) {
    const int error = errno;
    ::close(fd);
    throw std::system_error(error, std::generic_category(), "netlink bind");
  }
  return fd;
}

}  // namespace

Result<policy::AddressSet> read_host_addresses() {
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0)
    return boost::system::error_code(errno, boost::system::generic_category());
  std::vector<policy::IpAddress> out;
  for (const ifaddrs* i = list; i != nullptr; i = i->ifa_next) {
    if (i->ifa_addr == nullptr) continue;
    if (i->ifa_addr->sa_family == AF_INET) {
      const auto* sin = reinterpret_cast<const sockaddr_in*>(i->ifa_addr);
      out.push_back(policy::IpAddress::v4(ntohl(sin->sin_addr.s_addr)));
    } else if (i->ifa_addr->sa_family == AF_INET6) {
      const auto* sin6 = reinterpret_cast<const sockaddr_in6*>(i->ifa_addr);
      std::array<std::uint8_t, 16> bytes{};
      std::memcpy(bytes.data(), sin6->sin6_addr.s6_addr, bytes.size());
      out.push_back(policy::IpAddress::v6(bytes));
    }
  }
  ::freeifaddrs(list);
  return policy::AddressSet(std::move(out));
}

HostAddressWatch::HostAddressWatch(boost::asio::io_context& ioc, Target& target)
    : socket_(ioc, open_address_notifications()), target_(target) {
  auto first = read_host_addresses();
  if (!first) throw boost::system::system_error(first.error(), "getifaddrs");
  publish(std::move(*first));
  wait();
}

void HostAddressWatch::wait() {
  socket_.async_wait(boost::asio::posix::descriptor_base::wait_read,
                     [this](const boost::system::error_code& ec) {
                       if (ec) return;  // closed at shutdown
                       drain_and_refresh();
                       wait();
                     });
}

// Reads every pending notification (their content does not matter: any change means a new
// read), then reads the addresses once for the whole burst.
void HostAddressWatch::drain_and_refresh() {
  for (;;) {
    const ssize_t n = ::recv(socket_.native_handle(), buffer_.data(), buffer_.size(), 0);
    if (n > 0) continue;
    if (n < 0 && errno == EINTR) continue;
    // EAGAIN: drained. ENOBUFS: notifications were lost, so a full read is due anyway.
    break;
  }
  auto now = read_host_addresses();
  if (!now) {
    std::cerr << R"({"event":"host_addresses_failed","error":")" << now.error().message() << "\"}"
              << std::endl;
    return;  // the previous set stays; the next notification tries again
  }
  publish(std::move(*now));
}

void HostAddressWatch::publish(policy::AddressSet set) {
  const auto current = target_.load(std::memory_order_acquire);
  if (current && *current == set) return;
  const std::size_t count = set.size();
  target_.store(std::make_shared<const policy::AddressSet>(std::move(set)),
                std::memory_order_release);
  std::cerr << R"({"event":"host_addresses","count":)" << count << "}" << std::endl;
}

}  // namespace sandgate::proxy
