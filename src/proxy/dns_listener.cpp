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
#include "proxy/descriptors.hpp"
#include "proxy/watchdog.hpp"

namespace sandgate::proxy {

namespace {

using udp = asio::ip::udp;
using Bytes = std::vector<std::uint8_t>;

// A query longer than this is not one a stub resolver sends (a name is at most 255 bytes;
// EDNS padding and cookies add a few hundred): FORMERR on UDP, connection closed on TCP.
constexpr std::size_t kMaxQueryBytes = 4096;
// Per worker and UDP socket: queries waiting for an upstream answer, whichever sandbox sent
// them (refused beyond it). A backstop only: each sandbox's own budget is at most half of it,
// so no sandbox alone reaches it. TCP clients count as connections of their sandbox.
constexpr std::size_t kMaxUdpInFlight = 2 * config::kMaxDnsQueriesPerSandbox;
// event.reason of the line that summarises a burst of lines left out (AuditBursts).
constexpr std::string_view kBurstSummary = "burst_summary";
// Audit lines of one kind (refusals of names, malformed queries, upstream failures) written
// per sandbox and 5-second AuditBursts window; beyond it they are counted and summarised. High
// enough that a reviewer sees every distinct name a normal build asks for; low enough that a
// sandbox asking for thousands of denied names a second writes at most 10 lines a second.
constexpr std::uint64_t kLinesPerWindow = 50;
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

// Writes a line of a kind that comes in floods through AuditBursts: the first
// `lines_per_window` of a burst per (sandbox, code), with the summary of the burst before it
// when one just ended; the others are counted in sandgate_audit_lines_suppressed_total.
void write_bursty(const WorkerDeps& deps, telemetry::AuditRecord r,
                  std::uint64_t lines_per_window = 1) {
  Shared& shared = *deps.shared;
  const auto admit =
      shared.audit_bursts.admit(r.sandbox_id, r.event, AuditBursts::Clock::now(), lines_per_window);
  if (admit.ended_suppressed != 0) {
    telemetry::AuditRecord summary = r;
    summary.host = {};
    summary.source_port = 0;
    summary.reason = kBurstSummary;
    summary.rule = {};
    summary.suggestion = {};
    summary.suppressed_lines = admit.ended_suppressed;
    shared.audit->write(summary);
  }
  if (admit.write) {
    shared.audit->write(r);
  } else {
    shared.metrics->audit_suppressed();
  }
}

// How long a client may keep the sink's answer: as long as sandgate keeps a negative one, so
// a name a reload allows is reachable as soon as an upstream NXDOMAIN would be.
constexpr std::uint32_t kSinkTtl = 5;

// The audit line (at most kLinesPerWindow per sandbox and burst window) and metrics (every
// one) of a refused name, with the config line that would allow it (policy::suggest); the
// EDE text it is answered with.
std::string record_refusal(const WorkerDeps& deps, const Peer& peer, std::string_view sandbox,
                           std::string_view name, std::string_view reason, std::string_view rule,
                           std::string_view detail, std::string_view suggestion) {
  telemetry::AuditRecord r = base_record(peer, sandbox);
  r.event = code_name(Errc::network_denied);
  r.host = name;
  r.reason = reason;
  r.rule = rule;
  r.suggestion = suggestion;
  write_bursty(deps, r, kLinesPerWindow);
  deps.shared->metrics->denial(reason);
  deps.shared->denials.add(sandbox, r.protocol, name, 0, reason, suggestion);
  deps.shared->metrics->connection(telemetry::Mode::dns, telemetry::Outcome::denied);
  std::string text(code_name(Errc::network_denied));
  text.append(": ").append(detail).append(" (").append(name).append(")");
  return text;
}

// A refusal: REFUSED with the EDE text.
Bytes refuse(const WorkerDeps& deps, const Peer& peer, std::string_view sandbox,
             const dns::Query& q, std::size_t limit, std::string_view name, std::string_view reason,
             std::string_view rule, std::string_view detail, std::string_view suggestion = {}) {
  const std::string text =
      record_refusal(deps, peer, sandbox, name, reason, rule, detail, suggestion);
  return dns::build_refusal(q, text, limit);
}

// A refused name answered with the sink address (A; AAAA gets none), remembered for the
// sandbox so that the transparent listener knows the connection that follows was refused
// here already, and answers it in its own protocol without a second line.
Bytes sink(const WorkerDeps& deps, const Peer& peer, const std::string& sandbox,
           const dns::Query& q, std::size_t limit, const std::string& name,
           const std::string& shown, const policy::Decision& d, const policy::IpAddress& address,
           std::string_view suggestion) {
  const auto reason = policy::reason_name(d.reason);
  const std::string text =
      record_refusal(deps, peer, sandbox, shown, reason, d.rule, reason, suggestion);
  if (q.qtype == dns::kTypeA) {
    deps.shared->dns_memory.remember(sandbox, name, {address}, std::chrono::seconds(kSinkTtl));
  }
  return dns::build_sink(q, address, kSinkTtl, text, limit);
}

// A failure with its own code (malformed query, upstream failure): audit line (limited like a
// refusal's) and metrics.
void record_failure(const WorkerDeps& deps, const Peer& peer, std::string_view sandbox, Errc code,
                    std::string_view name = {}) {
  telemetry::AuditRecord r = base_record(peer, sandbox);
  r.event = code_name(code);
  r.host = name;
  write_bursty(deps, r, kLinesPerWindow);
  deps.shared->metrics->error(code);
  deps.shared->metrics->connection(telemetry::Mode::dns, telemetry::Outcome::error);
}

// An allowed A or AAAA query the cache could not answer: it waits for an upstream lookup.
struct NeedsUpstream {
  dns::Query q;
  std::size_t limit = 0;  // response size bound
  std::string name;       // normalised, as the resolver takes it
  std::string shown;      // as the audit log shows it
  std::string sandbox;
  // The name is held (policy::Decision::held): an operator's answer comes before the lookup.
  bool held = false;
};

// What to send (nothing: drop it; on TCP, close) or the lookup still to make.
using Step = std::variant<std::optional<Bytes>, NeedsUpstream>;

// The response to an allowed query from the resolver's result; nullopt on shutdown.
std::optional<Bytes> answer_from(const WorkerDeps& deps, const Peer& peer, const dns::Query& q,
                                 std::size_t limit, const std::string& name,
                                 const std::string& shown, const std::string& sandbox,
                                 const Result<dns::Answer>& answer) {
  if (!answer) {
    if (answer.error() == std::errc::operation_canceled) return std::nullopt;  // shutdown
    const Errc code = answer.error() == Errc::upstream_timeout ? Errc::upstream_timeout
                                                               : Errc::upstream_dns_failed;
    record_failure(deps, peer, sandbox, code, shown);
    return dns::build_error(q, dns::Rcode::servfail);
  }
  // Upstream's own negative answer, passed on as such (with its SOA, so the client caches it):
  // an answer, not a failure.
  if (answer->negative != dns::Answer::Negative::none) {
    deps.shared->metrics->connection(telemetry::Mode::dns, telemetry::Outcome::allowed);
    const auto rcode = answer->negative == dns::Answer::Negative::nxdomain ? dns::Rcode::nxdomain
                                                                           : dns::Rcode::noerror;
    return dns::build_negative(q, rcode, answer->soa ? &*answer->soa : nullptr, limit);
  }
  std::vector<policy::IpAddress> given;
  for (const auto& a : answer->addresses) {
    if (a.is_v4() == (q.qtype == dns::kTypeA)) given.push_back(a);
  }
  const auto ttl = static_cast<std::uint32_t>(std::max<std::int64_t>(1, answer->ttl.count()));
  if (!given.empty()) {
    deps.shared->dns_memory.remember(sandbox, name, given, std::chrono::seconds(ttl));
  }
  deps.shared->metrics->connection(telemetry::Mode::dns, telemetry::Outcome::allowed);
  if (given.empty() && answer->soa) {  // NODATA for this family; the other has addresses
    return dns::build_negative(q, dns::Rcode::noerror, &*answer->soa, limit);
  }
  return dns::build_answer(q, given, ttl, limit);
}

// Everything about one message that needs no waiting: parse, decide, and answer from the
// cache when it can. Takes no budget: a cached answer never waits on anyone's.
Step decide_query(std::span<const std::uint8_t> message, const Peer& peer, bool over_udp,
                  const WorkerDeps& deps) {
  const std::shared_ptr<const Snapshot> snap = deps.shared->current();
  const std::string* sandbox_ptr = snap->sandbox_for(peer.address);
  const std::string_view sandbox = sandbox_ptr ? std::string_view(*sandbox_ptr) : "";

  auto parsed = message.size() > kMaxQueryBytes
                    ? std::variant<dns::Query, dns::ParseError>(
                          dns::ParseError{dns::Rcode::formerr, dns::read_header(message)})
                    : dns::parse_query(message);
  if (const auto* error = std::get_if<dns::ParseError>(&parsed)) {
    record_failure(deps, peer, sandbox, Errc::malformed_request);
    if (!error->header) return std::optional<Bytes>();
    return dns::build_header_error(*error->header, error->rcode);
  }
  dns::Query& q = std::get<dns::Query>(parsed);
  const std::size_t limit = over_udp ? dns::udp_limit(q) : dns::kMaxMessageBytes;

  if (!sandbox_ptr) {
    const auto reason = policy::reason_name(policy::Reason::unknown_sandbox);
    return refuse(deps, peer, sandbox, q, limit, q.name, reason, {}, reason);
  }
  const policy::Host host = policy::normalize_host(q.name);
  std::string shown = host.is_valid() ? host.display() : q.name;
  policy::Decision d;
  if (host.is_address()) {  // "1.2.3.4" or "2130706433" is never looked up as a DNS name
    d.reason = policy::Reason::ip_literal_not_allowed;
  } else {
    d = snap->policy->decide(sandbox, host, 0, policy::EntryMode::dns);
  }
  // A held name (unlisted = "hold"): decided again when the sandbox holds a grant for it; else
  // an address question waits for an operator's answer before its lookup (ask_upstream).
  bool held = false;
  if (d.held) {
    if (deps.shared->holds.granted(sandbox, shown, 0)) {
      d = snap->policy->decide(sandbox, host, 0, policy::EntryMode::dns, true);
    } else {
      held = q.qtype == dns::kTypeA || q.qtype == dns::kTypeAaaa;
    }
  }
  // A question names no port: the suggestion opens the name on the sandbox's ports.
  const std::string suggestion =
      d.is_allowed()
          ? std::string()
          : policy::suggest(config::home_of(*snap->config, sandbox), host, std::nullopt, d).text();
  const config::Dns& dns_config = snap->config->dns;
  if (held) {
    return NeedsUpstream{std::move(q),         limit, host.name, std::move(shown),
                         std::string(sandbox), true};
  }
  if (!d.is_allowed() && host.is_name() &&
      dns_config.denied_names == config::Dns::DeniedNames::sink &&
      (q.qtype == dns::kTypeA || q.qtype == dns::kTypeAaaa)) {
    return sink(deps, peer, *sandbox_ptr, q, limit, host.name, shown, d, dns_config.sink_address,
                suggestion);
  }
  if (!d.is_allowed()) {
    const auto reason = policy::reason_name(d.reason);
    return refuse(deps, peer, sandbox, q, limit, shown, reason, d.rule, reason, suggestion);
  }
  if (q.qtype != dns::kTypeA && q.qtype != dns::kTypeAaaa) {
    // No rule: the one that allowed the name did not decide this.
    return refuse(deps, peer, sandbox, q, limit, shown, kTypeNotAllowed, {},
                  "only A and AAAA are answered");
  }
  // The policy may change while a lookup runs; the answer is for the decision made here.
  if (auto now = deps.resolver->lookup_now(host.name)) {
    return answer_from(deps, peer, q, limit, host.name, shown, std::string(sandbox), *now);
  }
  return NeedsUpstream{std::move(q), limit, host.name, std::move(shown), std::string(sandbox)};
}

// One upstream lookup counted against its sandbox's budget (shared by every worker) and,
// for UDP, the worker's own bound, from admission until its answer is built.
class QuerySlot {
 public:
  // Nullopt when either is spent. `worker`: null for TCP, whose connections bound it.
  static std::optional<QuerySlot> take(const WorkerDeps& deps, const std::string& sandbox,
                                       std::size_t* worker) {
    if (worker != nullptr && *worker >= kMaxUdpInFlight) return std::nullopt;
    const std::size_t budget = deps.shared->current()->config->limits.max_dns_queries_per_sandbox;
    auto& counter = deps.shared->dns_queries.for_sandbox(sandbox);
    if (counter.fetch_add(1, std::memory_order_relaxed) >= budget) {
      counter.fetch_sub(1, std::memory_order_relaxed);
      return std::nullopt;
    }
    if (worker != nullptr) ++*worker;
    return QuerySlot(&counter, worker);
  }
  QuerySlot(QuerySlot&& o) noexcept
      : sandbox_(std::exchange(o.sandbox_, nullptr)), worker_(std::exchange(o.worker_, nullptr)) {}
  QuerySlot& operator=(QuerySlot&&) = delete;
  ~QuerySlot() {
    if (sandbox_ != nullptr) sandbox_->fetch_sub(1, std::memory_order_relaxed);
    if (worker_ != nullptr) --*worker_;
  }

 private:
  QuerySlot(std::atomic<std::size_t>* sandbox, std::size_t* worker)
      : sandbox_(sandbox), worker_(worker) {}
  std::atomic<std::size_t>* sandbox_;
  std::size_t* worker_;
};

// A query over its sandbox's budget: REFUSED with an EDE naming the code, audited per burst.
Bytes refuse_busy(const WorkerDeps& deps, const Peer& peer, const NeedsUpstream& u) {
  telemetry::AuditRecord r = base_record(peer, u.sandbox);
  r.event = code_name(Errc::too_many_dns_queries);
  r.host = u.shown;
  write_bursty(deps, r);
  deps.shared->metrics->error(Errc::too_many_dns_queries);
  deps.shared->metrics->connection(telemetry::Mode::dns, telemetry::Outcome::error);
  std::string text(code_name(Errc::too_many_dns_queries));
  text.append(": too many lookups of this sandbox in flight (").append(u.shown).append(")");
  return dns::build_refusal(u.q, text, u.limit, dns::kEdeOther);
}

// A held name's question: waits for an operator's answer, up to the hold timeout, then is
// decided again on the config now in force. nullopt to go on with the lookup; else the refusal
// to send (denied_by_operator, with the operator's message as its EDE text, hold_expired, or
// what a reload's rules say).
asio::awaitable<std::optional<Bytes>> settle_held_name(const NeedsUpstream& u, const Peer& peer,
                                                       const WorkerDeps& deps) {
  const telemetry::AuditRecord line = base_record(peer, u.sandbox);
  HoldQuestion question{u.sandbox, u.shown, 0, "dns", {}, {}, policy::EntryMode::dns};
  const auto timeout = deps.shared->current()->config->limits.hold_timeout;
  HoldEnd end = co_await await_answer(*deps.shared, std::move(question), line, timeout);
  policy::Decision d;
  if (end.refusal) {
    d = std::move(*end.refusal);
  } else {
    const auto now = deps.shared->current();
    d = now->policy->decide(u.sandbox, policy::normalize_host(u.name), 0, policy::EntryMode::dns,
                            end.granted);
    if (d.held) d = hold_refusal(HoldOutcome::expired);
  }
  if (d.is_allowed()) co_return std::nullopt;
  const std::string_view reason = policy::reason_name(d.reason);
  const std::string detail = d.message.empty() ? std::string(reason) : d.message;
  co_return refuse(deps, peer, u.sandbox, u.q, u.limit, u.shown, reason, d.rule, detail, {});
}

asio::awaitable<std::optional<Bytes>> ask_upstream(const NeedsUpstream& u, const Peer& peer,
                                                   WorkerDeps deps) {
  if (u.held) {
    std::optional<Bytes> refusal = co_await settle_held_name(u, peer, deps);
    if (refusal) co_return refusal;
  }
  const Result<dns::Answer> answer = co_await deps.resolver->lookup(u.name);
  co_return answer_from(deps, peer, u.q, u.limit, u.name, u.shown, u.sandbox, answer);
}

// Counts an exception that escaped a coroutine (a bug: failures are values).
auto count_escapes(const WorkerDeps& deps) {
  return [shared = deps.shared](std::exception_ptr e) {
    if (e) shared->metrics->error(Errc::internal_error);
  };
}

asio::awaitable<void> pause_after_error(asio::any_io_executor ex) {
  asio::steady_timer pause(ex, kAcceptBackoff);
  co_await pause.async_wait(use_tuple);
}

// One UDP query that waits for upstream, holding its slot until the answer is sent.
asio::awaitable<void> serve_upstream_datagram(udp::socket& socket, NeedsUpstream u,
                                              udp::endpoint from, WorkerDeps deps, QuerySlot slot) {
  const QuerySlot held = std::move(slot);
  const Peer peer = make_peer(from.address(), from.port());
  const std::optional<Bytes> response = co_await ask_upstream(u, peer, deps);
  if (response && socket.is_open()) {
    co_await socket.async_send_to(asio::buffer(*response), from, use_tuple);
  }
}

// The DNS-over-TCP clients of one acceptor, so closing the acceptor closes them. Touched only
// on the worker's thread.
struct TcpClients {
  std::unordered_set<tcp::socket*> live;
};

// A DNS-over-TCP client counted as one of its sandbox's connections (and against
// max_connections), as the proxy's bound sessions are, from accept to close. Clients from no
// sandbox's address share one count under the empty id.
class TcpSlot {
 public:
  static std::optional<TcpSlot> take(Shared& shared, const std::string& sandbox,
                                     const config::Limits& limits) {
    TcpSlot slot(shared);
    shared.connections.total.fetch_add(1);
    if (shared.connections.bound.fetch_add(1) >= limits.max_connections) return std::nullopt;
    slot.sandbox_ = &shared.connections.for_sandbox(sandbox);
    if (slot.sandbox_->fetch_add(1, std::memory_order_relaxed) >=
        limits.max_connections_per_sandbox) {
      return std::nullopt;
    }
    return slot;
  }
  TcpSlot(TcpSlot&& o) noexcept
      : shared_(std::exchange(o.shared_, nullptr)), sandbox_(std::exchange(o.sandbox_, nullptr)) {}
  TcpSlot& operator=(TcpSlot&&) = delete;
  ~TcpSlot() {
    if (shared_ == nullptr) return;
    shared_->connections.total.fetch_sub(1);
    shared_->connections.bound.fetch_sub(1);
    if (sandbox_ != nullptr) sandbox_->fetch_sub(1, std::memory_order_relaxed);
  }

 private:
  explicit TcpSlot(Shared& shared) : shared_(&shared) {}
  Shared* shared_;
  std::atomic<std::size_t>* sandbox_ = nullptr;
};

// One TCP client: length-prefixed queries answered in order until it closes, sends garbage
// framing, or stays silent for limits.header_timeout.
asio::awaitable<void> serve_tcp_client(tcp::socket client, WorkerDeps deps,
                                       std::shared_ptr<TcpClients> clients, TcpSlot slot) {
  const TcpSlot held = std::move(slot);
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
    Step step = decide_query(message, peer, false, deps);
    std::optional<Bytes> response;
    if (auto* u = std::get_if<NeedsUpstream>(&step)) {
      if (auto query_slot = QuerySlot::take(deps, u->sandbox, nullptr)) {
        response = co_await ask_upstream(*u, peer, deps);
      } else {
        response = refuse_busy(deps, peer, *u);
      }
    } else {
      response = std::move(std::get<std::optional<Bytes>>(step));
    }
    if (!response) co_return;
    const std::array<std::uint8_t, 2> length{static_cast<std::uint8_t>(response->size() >> 8),
                                             static_cast<std::uint8_t>(response->size() & 0xFF)};
    const std::array<asio::const_buffer, 2> out{asio::buffer(length), asio::buffer(*response)};
    auto [write_ec, w] = co_await asio::async_write(client, out, use_tuple);
    if (write_ec) co_return;
  }
}

// A TCP client over its sandbox's connection cap: closed at once, audited per burst.
void refuse_tcp_client(const WorkerDeps& deps, const tcp::endpoint& from,
                       const std::string& sandbox) {
  const Peer peer = make_peer(from.address(), from.port());
  telemetry::AuditRecord r = base_record(peer, sandbox);
  r.event = code_name(Errc::too_many_connections);
  write_bursty(deps, r);
  deps.shared->metrics->error(Errc::too_many_connections);
  deps.shared->metrics->connection(telemetry::Mode::dns, telemetry::Outcome::error);
}

}  // namespace

void write_burst_summaries(Shared& shared, AuditBursts::Clock::time_point now) {
  for (const AuditBursts::Summary& s : shared.audit_bursts.take_ended(now)) {
    telemetry::AuditRecord r;
    r.event = s.code;
    r.outcome = "failure";
    r.sandbox_id = s.sandbox;
    r.protocol = policy::mode_name(policy::EntryMode::dns);
    r.reason = kBurstSummary;
    r.suppressed_lines = s.suppressed;
    shared.audit->write(r);
  }
}

asio::awaitable<void> dns_udp_loop(udp::socket& socket, WorkerDeps deps) {
  const auto ex = socket.get_executor();
  // Upstream lookups of this socket's queries in flight (the worker's backstop bound).
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
    const Peer peer = make_peer(from.address(), from.port());
    Step step = decide_query(std::span(buffer.data(), n), peer, true, deps);
    std::optional<Bytes> response;
    if (auto* u = std::get_if<NeedsUpstream>(&step)) {
      if (auto slot = QuerySlot::take(deps, u->sandbox, in_flight.get())) {
        asio::co_spawn(ex,
                       serve_upstream_datagram(socket, std::move(*u), from, deps, std::move(*slot)),
                       count_escapes(deps));
        continue;
      }
      response = refuse_busy(deps, peer, *u);
    } else {
      response = std::move(std::get<std::optional<Bytes>>(step));
    }
    // Answered without waiting on anyone: sent from the loop (a UDP send does not block).
    if (response) co_await socket.async_send_to(asio::buffer(*response), from, use_tuple);
  }
}

asio::awaitable<void> dns_tcp_accept_loop(tcp::acceptor& acceptor, WorkerDeps deps) {
  const auto ex = acceptor.get_executor();
  auto clients = std::make_shared<TcpClients>();
  boost::system::error_code local_ec;
  const tcp::endpoint local = acceptor.local_endpoint(local_ec);
  const std::string listener =
      "dns/tcp " + local.address().to_string() + ":" + std::to_string(local.port());
  for (;;) {
    auto [ec, socket] = co_await acceptor.async_accept(use_tuple);
    if (!acceptor.is_open() || ec == asio::error::operation_aborted) break;
    if (ec) {  // out of descriptors or memory: say so, and back off instead of spinning
      report_accept_failure(*deps.shared->metrics, ec, listener);
      co_await pause_after_error(ex);
      continue;
    }
    boost::system::error_code peer_ec;
    const tcp::endpoint from = socket.remote_endpoint(peer_ec);
    if (peer_ec) continue;  // already gone
    const auto snap = deps.shared->current();
    const std::string* found = snap->sandbox_for(make_peer(from.address(), from.port()).address);
    const std::string sandbox = found ? *found : std::string();
    auto slot = TcpSlot::take(*deps.shared, sandbox, snap->config->limits);
    if (!slot) {
      refuse_tcp_client(deps, from, sandbox);
      boost::system::error_code ignored;
      socket.close(ignored);
      continue;
    }
    asio::co_spawn(ex, serve_tcp_client(std::move(socket), deps, clients, std::move(*slot)),
                   count_escapes(deps));
  }
  // The listener closed (shutdown): close the clients too, so they unwind now.
  for (tcp::socket* s : std::vector<tcp::socket*>(clients->live.begin(), clients->live.end())) {
    boost::system::error_code ignored;
    s->close(ignored);
  }
}

}  // namespace sandgate::proxy
