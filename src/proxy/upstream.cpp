#include "proxy/upstream.hpp"

#include <sys/socket.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <cerrno>
#include <memory>

namespace sandgate::proxy {

namespace {

// What socket.async_connect does, with two system calls fewer: the socket is made
// non-blocking in Asio's view (the relay needs that, and it spares Asio's own ioctl), and the
// wait for writability is not followed by Asio's poll(2), which guards against spurious
// wake-ups that an edge-triggered EPOLLOUT on a connecting TCP socket does not have: it comes
// only once the handshake is over or has failed, and SO_ERROR says which.
asio::awaitable<boost::system::error_code> connect_nonblocking(tcp::socket& socket,
                                                               const tcp::endpoint& ep) {
  boost::system::error_code ec;
  if (!socket.is_open()) {
    socket.open(ep.protocol(), ec);
    if (ec) co_return ec;
  }
  socket.native_non_blocking(true, ec);
  if (ec) co_return ec;
  if (::connect(socket.native_handle(), ep.data(), static_cast<socklen_t>(ep.size())) == 0) {
    co_return ec;
  }
  const int connect_errno = errno;
  if (connect_errno != EINPROGRESS) {
    // As Asio reports it: EAGAIN from a TCP connect means no local port or route was free.
    if (connect_errno == EAGAIN) co_return asio::error::no_buffer_space;
    co_return boost::system::error_code(connect_errno, asio::error::get_system_category());
  }
  auto [wait_ec] = co_await socket.async_wait(tcp::socket::wait_write, use_tuple);
  if (wait_ec) co_return wait_ec;  // closed under it: operation_aborted
  int err = 0;
  socklen_t len = sizeof(err);
  if (::getsockopt(socket.native_handle(), SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
  if (err != 0) co_return boost::system::error_code(err, asio::error::get_system_category());
  co_return ec;
}

// One connect attempt under a deadline. Returns the socket error, or timed_out. The timer's
// handler may run after this frame has gone (it was already queued when the connect won), so
// it reaches the socket only through state it shares, which says whether the attempt is over.
asio::awaitable<boost::system::error_code> connect_once(tcp::socket& socket, tcp::endpoint ep,
                                                        std::chrono::milliseconds timeout) {
  struct Attempt {
    tcp::socket* socket;
    bool timed_out = false;
  };
  const auto attempt = std::make_shared<Attempt>(Attempt{&socket});
  asio::steady_timer timer(socket.get_executor(), timeout);
  timer.async_wait([attempt](boost::system::error_code ec) {
    if (ec || attempt->socket == nullptr) return;
    attempt->timed_out = true;
    boost::system::error_code ignored;
    attempt->socket->close(ignored);  // the connect completes with operation_aborted
  });
  auto ec = co_await connect_nonblocking(socket, ep);
  attempt->socket = nullptr;
  timer.cancel();
  if (attempt->timed_out) co_return asio::error::timed_out;
  co_return ec;
}

}  // namespace

bool is_local_exhaustion(const boost::system::error_code& ec) {
  return ec == asio::error::no_descriptors                            // EMFILE
         || ec == boost::system::errc::too_many_files_open_in_system  // ENFILE
         || ec == asio::error::no_buffer_space                        // ENOBUFS
         || ec == asio::error::no_memory;                             // ENOMEM
}

namespace {

// Whether the policy lets `out` dial the literal `host`; a refusal is noted in `out`.
// Policy::decide checked the literal without the host's live addresses.
bool admit_literal(const WorkerDeps& deps, const Snapshot& snap, std::string_view sandbox,
                   const policy::Host& host, std::uint16_t port, Dialed& out) {
  const auto host_addresses = deps.shared->host_addresses.load(std::memory_order_acquire);
  policy::Decision d = snap.policy->check_address(sandbox, host.address, port, *host_addresses);
  if (d.allowed) return true;
  out.error = Errc::network_denied;
  out.denial = std::move(d);
  out.denied_host = host;
  out.address = host.address;
  return false;
}

// The addresses of the name `host` that the policy lets this dial try, all judged against one
// view of the host's addresses. None: `out.error` says why (a failed lookup, or the refusal of
// the first address refused).
asio::awaitable<std::vector<policy::IpAddress>> resolve_allowed(const WorkerDeps& deps,
                                                                const Snapshot& snap,
                                                                std::string_view sandbox,
                                                                const policy::Host& host,
                                                                std::uint16_t port, Dialed& out) {
  telemetry::Metrics& metrics = *deps.shared->metrics;
  const auto host_addresses = deps.shared->host_addresses.load(std::memory_order_acquire);
  std::vector<policy::IpAddress> candidates;
  const auto start = std::chrono::steady_clock::now();
  auto answer = co_await deps.resolver->resolve(host.name);
  if (!answer) {
    metrics.dns_lookup(telemetry::DnsResult::failed);
    out.error = answer.error() == make_error_code(Errc::upstream_timeout)
                    ? Errc::upstream_timeout
                    : Errc::upstream_dns_failed;
    co_return candidates;
  }
  if (answer->from_cache) {
    metrics.dns_lookup(telemetry::DnsResult::cache_hit);
  } else {
    metrics.dns_lookup(telemetry::DnsResult::ok);
    metrics.dns_lookup_duration(std::chrono::steady_clock::now() - start);
  }
  for (const policy::IpAddress& a : answer->addresses) {
    policy::Decision d = snap.policy->check_address(sandbox, a, port, *host_addresses);
    if (d.allowed) {
      candidates.push_back(a);
    } else if (out.error == Errc::ok) {
      out.error = Errc::network_denied;  // remembered; cleared if any address passes
      out.denial = std::move(d);
      out.denied_host.kind = policy::Host::Kind::address;
      out.denied_host.address = a;
    }
  }
  if (candidates.empty()) {
    if (out.error == Errc::ok) out.error = Errc::upstream_dns_failed;
  } else {
    out.error = Errc::ok;
  }
  co_return candidates;
}

}  // namespace

// The address checks and the lookup are helpers of their own (a plain function and a
// coroutine), so that this frame, which every dial pays for, stays small enough for Asio's
// per-thread cache to recycle.
asio::awaitable<Dialed> dial_checked(const WorkerDeps& deps, const Snapshot& snap,
                                     std::string_view sandbox, const policy::Host& host,
                                     std::uint16_t port) {
  Dialed out(co_await asio::this_coro::executor);
  telemetry::Metrics& metrics = *deps.shared->metrics;
  std::vector<policy::IpAddress> candidates;
  if (host.is_address()) {
    if (!admit_literal(deps, snap, sandbox, host, port, out)) co_return out;
    candidates.push_back(host.address);
  } else {
    candidates = co_await resolve_allowed(deps, snap, sandbox, host, port, out);
    if (candidates.empty()) co_return out;
  }

  // The connect phase has a budget of its own, shared by at most kMaxDialAttempts addresses,
  // so a name with many addresses that blackhole SYNs cannot hold the session for long.
  const auto timeout = snap.config->limits.connect_timeout;
  const auto budget_end = std::chrono::steady_clock::now() + kDialBudgetTimeouts * timeout;
  if (candidates.size() > kMaxDialAttempts) candidates.resize(kMaxDialAttempts);
  bool any_refused = false;
  for (const policy::IpAddress& a : candidates) {
    const auto start = std::chrono::steady_clock::now();
    if (start >= budget_end) break;
    out.address = a;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(budget_end - start) +
                      std::chrono::milliseconds(1);
    const auto ec = co_await connect_once(out.socket, {to_asio(a), port}, std::min(timeout, left));
    if (!ec) {
      metrics.upstream_connect_duration(std::chrono::steady_clock::now() - start);
      boost::system::error_code ignored;
      out.socket.set_option(tcp::no_delay(true), ignored);
      co_return out;
    }
    boost::system::error_code ignored;
    out.socket.close(ignored);
    if (is_local_exhaustion(ec)) {
      // The socket could not even be opened: our overload, not the destination's refusal,
      // and the next address would fail the same way.
      out.error = Errc::local_resources_exhausted;
      co_return out;
    }
    if (ec != asio::error::timed_out) any_refused = true;
  }
  out.error = any_refused ? Errc::upstream_connect_failed : Errc::upstream_timeout;
  co_return out;
}

}  // namespace sandgate::proxy
