#pragma once

#include <boost/asio/awaitable.hpp>
#include <optional>

#include "common/errc.hpp"
#include "policy/policy.hpp"
#include "proxy/runtime.hpp"

namespace sandgate::proxy {

// The result of dialling an allowed destination: a connected socket, or why not.
// (Constructed outside the coroutine body: GCC 12 miscompiles braced aggregate
// initialisation of non-trivial members inside coroutines.)
struct Dialed {
  explicit Dialed(const asio::any_io_executor& ex) : socket(ex) {}

  // ok, network_denied, upstream_dns_failed, _connect_failed, _timeout, or
  // local_resources_exhausted (no descriptor or memory for the upstream socket)
  Errc error = Errc::ok;
  policy::Decision denial;   // error == network_denied: why every address was refused
  policy::Host denied_host;  // error == network_denied: the refused address, for suggestions
  tcp::socket socket;
  policy::IpAddress address;  // the address dialled (or last tried)
};

// At most this many of a name's allowed addresses are tried, one after another, all within
// kDialBudgetTimeouts x limits.connect_timeout (each attempt also within one connect_timeout).
// A dial therefore ends within dns.timeout + kDialBudgetTimeouts x connect_timeout.
inline constexpr std::size_t kMaxDialAttempts = 4;
inline constexpr int kDialBudgetTimeouts = 2;

// Resolves an allowed host once, checks every address (an IP literal too) with
// Policy::check_address against the host's current addresses (Shared::host_addresses), and
// connects to the first allowed address that answers, trying them in order within the budget
// above. The address dialled is exactly one that passed the check:
// there is no second resolution between check and dial (no DNS-rebinding window).
// Whether a socket operation failed for lack of descriptors or memory in this process or
// host (EMFILE, ENFILE, ENOBUFS, ENOMEM): a local overload, never the peer's doing.
bool is_local_exhaustion(const boost::system::error_code& ec);

boost::asio::awaitable<Dialed> dial_checked(const WorkerDeps& deps, const Snapshot& snap,
                                            std::string_view sandbox, const policy::Host& host,
                                            std::uint16_t port);

}  // namespace sandgate::proxy
