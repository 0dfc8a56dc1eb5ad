// Sandbox DNS over UDP and TCP: parse strictly, decide with the sandbox's policy, resolve only
// what is allowed, refuse the rest with an Extended DNS Error and one audit line.
#include "proxy/dns_listener.hpp"

#include <array>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <optional>
#include <span>
#include <string>
#include <unordered_set>
#include <variant>
#include <vector>

#include "dns/message.hpp"
#include "proxy/watchdog.hpp"

namespace sandgate::proxy {

namespace {

using udp = asio::ip::udp;
using Bytes = std::vector<std::uint8_t>;

// A query longer than this is not one a stub resolver sends (a name is at most 255 bytes;
// EDNS padding and cookies add a few hundred): FORMERR on UDP, connection closed on TCP.
constexpr std::size_t kMaxQueryBytes = 4096;
// Per worker: TCP clients served at once (new ones are closed beyond it), and UDP queries
// waiting for an upstream answer (new datagrams are dropped beyond it; the client retries).
constexpr std::size_t kMaxTcpClients = 512;
constexpr std::size_t kMaxUdpInFlight = 1024;
// Audit reason for an allowed name asked with a type other than A or AAAA. Not a policy
// Reason: the policy decides names, this listener decides record types.
constexpr std::string_view kTypeNotAllowed = "query_type_not_allowed";

// Who asked: the source address as the policy and the audit log see it.
struct Peer {
  policy::IpAddress address;
  std::string ip;
  std::uint16_t port = 0;
};

Peer make_peer(const asio::ip::address& a, std::uint16_t port) {
  asio::ip::address plain = a;
  if (a.is_v6() && a.to_v6().is_v4_mapped()) {
    plain = asio::ip::make_address_v4(asio::ip::v4_mapped, a.to_v6());
  }
  return {to_policy(plain), plain.to_string(), port};
}

telemetry::AuditRecord base_record(const Peer& peer, std::string_view sandbox) {
  telemetry::AuditRecord r;
  r.sandbox_id = sandbox;
  r.source_ip = peer.ip;
  r.source_port = peer.port;
  r.protocol = policy::mode_name(policy::EntryMode::dns);
  r.outcome = "failure";
  return r;
}

// A refusal: audit line, metrics, REFUSED with the EDE text.
Bytes refuse(const WorkerDeps& deps, const Peer& peer, std::string_view sandbox,
             const dns::Query& q, std::size_t limit, std::string_view name, std::string_view reason,
             std::string_view rule, std::string_view detail) {
  telemetry::AuditRecord r = base_record(peer, sandbox);
  r.event = code_name(Errc::network_denied);
  r.host = name;
  r.reason = reason;
  r.rule = rule;
  deps.shared->audit->write(r);
  deps.shared->metrics->denial(reason);
  deps.shared->metrics->connection(telemetry::Mode::dns, telemetry::Outcome::denied);
  std::string text(code_name(Errc::network_denied));
  text.append(": ").append(detail).append(" (").append(name).append(")");
  return dns::build_refusal(q, text, limit);
}

// A failure with its own code (malformed query, upstream failure): audit line and metrics.
void record_failure(const WorkerDeps& deps, const Peer& peer, std::string_view sandbox, Errc code,
                    std::string_view name = {}) {
  telemetry::AuditRecord r = base_record(peer, sandbox);
  r.event = code_name(code);
  r.host = name;
  deps.shared->audit->write(r);
  deps.shared->metrics->error(code);
  deps.shared->metrics->connection(telemetry::Mode::dns, telemetry::Outcome::error);
}

// The response to one message, or nothing (drop it; on TCP, close). `over_udp`: responses are
// bounded by the client's UDP size and truncated (TC) beyond it.
asio::awaitable<std::optional<Bytes>> respond(std::span<const std::uint8_t> message,
                                              const Peer& peer, bool over_udp, WorkerDeps deps) {
  const std::shared_ptr<const Snapshot> snap = deps.shared->current();
  const std::string* sandbox_ptr = snap->sandbox_for(peer.address);
  const std::string_view sandbox = sandbox_ptr ? std::string_view(*sandbox_ptr) : "";

  auto parsed = message.size() > kMaxQueryBytes
                    ? std::variant<dns::Query, dns::ParseError>(
                          dns::ParseError{dns::Rcode::formerr, dns::read_header(message)})
                    : dns::parse_query(message);
  if (const auto* error = std::get_if<dns::ParseError>(&parsed)) {
    record_failure(deps, peer, sandbox, Errc::malformed_request);
    if (!error->header) co_return std::nullopt;
    co_return dns::build_header_error(*error->header, error->rcode);
  }
  const dns::Query& q = std::get<dns::Query>(parsed);
  const std::size_t limit = over_udp ? dns::udp_limit(q) : dns::kMaxMessageBytes;

  if (!sandbox_ptr) {
    const auto reason = policy::reason_name(policy::Reason::unknown_sandbox);
    co_return refuse(deps, peer, sandbox, q, limit, q.name, reason, {}, reason);
  }
  const policy::Host host = policy::normalize_host(q.name);
  const std::string shown = host.is_valid() ? host.display() : q.name;
  policy::Decision d;
  if (host.is_address()) {  // "1.2.3.4" or "2130706433" is never looked up as a DNS name
    d.reason = policy::Reason::ip_literal_not_allowed;
  } else {
    d = snap->policy->decide(sandbox, host, 0, policy::EntryMode::dns);
  }
  if (!d.is_allowed()) {
    const auto reason = policy::reason_name(d.reason);
    co_return refuse(deps, peer, sandbox, q, limit, shown, reason, d.rule, reason);
  }
  if (q.qtype != dns::kTypeA && q.qtype != dns::kTypeAaaa) {
    // No rule: the one that allowed the name did not decide this.
    co_return refuse(deps, peer, sandbox, q, limit, shown, kTypeNotAllowed, {},
                     "only A and AAAA are answered");
  }

  // The policy may change while the lookup runs; the answer is for the decision made above.
  const std::string sandbox_id(sandbox);
  const Result<dns::Answer> answer = co_await deps.resolver->resolve(host.name);
  if (!answer) {
    if (answer.error() == std::errc::operation_canceled) co_return std::nullopt;  // shutdown
    const Errc code = answer.error() == Errc::upstream_timeout ? Errc::upstream_timeout
                                                               : Errc::upstream_dns_failed;
    record_failure(deps, peer, sandbox_id, code, shown);
    co_return dns::build_error(q, dns::Rcode::servfail);
  }
  std::vector<policy::IpAddress> given;
  for (const auto& a : answer->addresses) {
    if (a.is_v4() == (q.qtype == dns::kTypeA)) given.push_back(a);
  }
  const auto ttl = static_cast<std::uint32_t>(std::max<std::int64_t>(1, answer->ttl.count()));
  if (!given.empty()) {
    deps.shared->dns_memory.remember(sandbox_id, host.name, given, std::chrono::seconds(ttl));
  }
  deps.shared->metrics->connection(telemetry::Mode::dns, telemetry::Outcome::allowed);
  co_return dns::build_answer(q, given, ttl, limit);
}

// Counts an exception that escaped a coroutine (a bug: failures are values).
auto count_escapes(const WorkerDeps& deps) {
  return [shared = deps.shared](std::exception_ptr e) {
    if (e) shared->metrics->error(Errc::internal_error);
  };
}

asio::awaitable<void> pause_after_error(asio::any_io_executor ex) {
  asio::steady_timer pause(ex, std::chrono::milliseconds(50));
  co_await pause.async_wait(use_tuple);
}

asio::awaitable<void> serve_datagram(udp::socket& socket, Bytes message, udp::endpoint from,
                                     WorkerDeps deps, std::shared_ptr<std::size_t> in_flight) {
  struct Release {
    std::size_t& count;
    ~Release() { --count; }
  } release{*in_flight};
  const Peer peer = make_peer(from.address(), from.port());
  const std::optional<Bytes> response = co_await respond(message, peer, true, deps);
  if (response && socket.is_open()) {
    co_await socket.async_send_to(asio::buffer(*response), from, use_tuple);
  }
}

// The DNS-over-TCP clients of one acceptor, so closing the acceptor closes them. Touched only
// on the worker's thread.
struct TcpClients {
  std::unordered_set<tcp::socket*> live;
};

// One TCP client: length-prefixed queries answered in order until it closes, sends garbage
// framing, or stays silent for limits.header_timeout.
asio::awaitable<void> serve_tcp_client(tcp::socket client, WorkerDeps deps,
                                       std::shared_ptr<TcpClients> clients) {
  clients->live.insert(&client);
  auto watchdog = std::make_shared<Watchdog>(client.get_executor());
  watchdog->start([&client] {
    boost::system::error_code ignored;
    client.close(ignored);
  });
  struct Cleanup {
    TcpClients& clients;
    tcp::socket& client;
    Watchdog& watchdog;
    ~Cleanup() {
      watchdog.stop();
      clients.live.erase(&client);
    }
  } cleanup{*clients, client, *watchdog};

  boost::system::error_code ec;
  const tcp::endpoint from = client.remote_endpoint(ec);
  if (ec) co_return;
  const Peer peer = make_peer(from.address(), from.port());
  const auto timeout = deps.shared->current()->config->limits.header_timeout;
  Bytes message;
  for (;;) {
    watchdog->arm(timeout);
    std::array<std::uint8_t, 2> prefix{};
    auto [read_ec, n] = co_await asio::async_read(client, asio::buffer(prefix), use_tuple);
    if (read_ec) co_return;
    const std::size_t size = static_cast<std::size_t>(prefix[0] << 8 | prefix[1]);
    if (size > kMaxQueryBytes) {  // not a query; reading it would only cost memory
      const auto snap = deps.shared->current();
      const std::string* sandbox = snap->sandbox_for(peer.address);
      record_failure(deps, peer, sandbox ? *sandbox : std::string(), Errc::malformed_request);
      co_return;
    }
    message.resize(size);
    auto [body_ec, m] = co_await asio::async_read(client, asio::buffer(message), use_tuple);
    if (body_ec) co_return;
    std::optional<Bytes> response = co_await respond(message, peer, false, deps);
    if (!response) co_return;
    const std::array<std::uint8_t, 2> length{static_cast<std::uint8_t>(response->size() >> 8),
                                             static_cast<std::uint8_t>(response->size() & 0xFF)};
    const std::array<asio::const_buffer, 2> out{asio::buffer(length), asio::buffer(*response)};
    auto [write_ec, w] = co_await asio::async_write(client, out, use_tuple);
    if (write_ec) co_return;
  }
}

}  // namespace

asio::awaitable<void> dns_udp_loop(udp::socket& socket, WorkerDeps deps) {
  const auto ex = socket.get_executor();
  auto in_flight = std::make_shared<std::size_t>(0);
  // One byte more than the largest query accepted, so an oversized datagram is recognised.
  Bytes buffer(kMaxQueryBytes + 1);
  for (;;) {
    udp::endpoint from;
    auto [ec, n] = co_await socket.async_receive_from(asio::buffer(buffer), from, use_tuple);
    if (!socket.is_open() || ec == asio::error::operation_aborted) co_return;
    if (ec) {
      co_await pause_after_error(ex);
      continue;
    }
    if (*in_flight >= kMaxUdpInFlight) continue;
    ++*in_flight;
    asio::co_spawn(
        ex,
        serve_datagram(socket, Bytes(buffer.begin(), buffer.begin() + n), from, deps, in_flight),
        count_escapes(deps));
  }
}

asio::awaitable<void> dns_tcp_accept_loop(tcp::acceptor& acceptor, WorkerDeps deps) {
  const auto ex = acceptor.get_executor();
  auto clients = std::make_shared<TcpClients>();
  for (;;) {
    auto [ec, socket] = co_await acceptor.async_accept(use_tuple);
    if (!acceptor.is_open() || ec == asio::error::operation_aborted) break;
    if (ec) {  // out of descriptors or memory: back off instead of spinning
      co_await pause_after_error(ex);
      continue;
    }
    if (clients->live.size() >= kMaxTcpClients) {
      deps.shared->metrics->error(Errc::too_many_connections);
      boost::system::error_code ignored;
      socket.close(ignored);
      continue;
    }
    asio::co_spawn(ex, serve_tcp_client(std::move(socket), deps, clients), count_escapes(deps));
  }
  // The listener closed (shutdown): close the clients too, so they unwind now.
  for (tcp::socket* s : std::vector<tcp::socket*>(clients->live.begin(), clients->live.end())) {
    boost::system::error_code ignored;
    s->close(ignored);
  }
}

}  // namespace sandgate::proxy
