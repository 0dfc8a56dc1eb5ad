#include "proxy/upstream.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <memory>

namespace sandgate::proxy {

namespace {

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
  auto [ec] = co_await socket.async_connect(ep, use_tuple);
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

asio::awaitable<Dialed> dial_checked(const WorkerDeps& deps, const Snapshot& snap,
                                     std::string_view sandbox, const policy::Host& host,
                                     std::uint16_t port) {
  Dialed out(co_await asio::this_coro::executor);
  telemetry::Metrics& metrics = *deps.shared->metrics;

  // One set for the whole dial: every candidate is judged against the same view of the host.
  const auto host_addresses = deps.shared->host_addresses.load(std::memory_order_acquire);

  std::vector<policy::IpAddress> candidates;
  if (host.is_address()) {
    // Policy::decide checked the literal without the host's live addresses.
    policy::Decision d = snap.policy->check_address(sandbox, host.address, port, *host_addresses);
    if (!d.allowed) {
      out.error = Errc::network_denied;
      out.denial = std::move(d);
      out.denied_host = host;
      out.address = host.address;
      co_return out;
    }
    candidates.push_back(host.address);
  } else {
    const auto start = std::chrono::steady_clock::now();
    auto answer = co_await deps.resolver->resolve(host.name);
    if (!answer) {
      metrics.dns_lookup(telemetry::DnsResult::failed);
      out.error = answer.error() == make_error_code(Errc::upstream_timeout)
                      ? Errc::upstream_timeout
                      : Errc::upstream_dns_failed;
      co_return out;
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
      co_return out;
    }
    out.error = Errc::ok;
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
