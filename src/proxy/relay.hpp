#pragma once

#include <boost/asio/awaitable.hpp>
#include <cstdint>
#include <functional>

#include "proxy/runtime.hpp"
#include "proxy/watchdog.hpp"

namespace sandgate::proxy {

struct RelayStats {
  std::uint64_t up = 0;    // client -> upstream
  std::uint64_t down = 0;  // upstream -> client
};

// Copies `from` to `to` until EOF (then half-closes `to`) or an error (then cancels both
// sockets so the other direction ends too). Between two plain sockets the bytes move with
// splice(2) through a pipe created on the first data, so they never enter user space and
// an idle direction holds no buffer. Every transfer pushes the watchdog forward by `idle`.
boost::asio::awaitable<void> relay_one_way(tcp::socket& from, tcp::socket& to,
                                           std::uint64_t& counter, Watchdog& watchdog,
                                           std::chrono::milliseconds idle);

// Both directions at once; returns when both have ended.
boost::asio::awaitable<RelayStats> relay_both(tcp::socket& client, tcp::socket& upstream,
                                              Watchdog& watchdog, std::chrono::milliseconds idle);

}  // namespace sandgate::proxy
