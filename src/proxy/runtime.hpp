#pragma once

#include <atomic>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "common/chunked_map.hpp"
#include "common/sharded_map.hpp"
#include "config/config.hpp"
#include "dns/resolver.hpp"
#include "policy/policy.hpp"
#include "proxy/audit_bursts.hpp"
#include "proxy/denial_counts.hpp"
#include "proxy/dns_memory.hpp"
#include "proxy/holds/holds.hpp"
#include "proxy/reload_status.hpp"
#include "secrets/injection.hpp"
#include "secrets/placeholder.hpp"
#include "telemetry/audit_log.hpp"
#include "telemetry/metrics.hpp"

namespace sandgate::secrets {
class CredentialStore;
}

namespace sandgate::proxy {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

// Completion token for awaited operations that report errors as values, not exceptions.
constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);

// One immutable view of the configuration: what a session reads for a decision. Swapped
// atomically as a whole on reload, so readers take no lock and never see half a change.
struct Snapshot {
  std::shared_ptr<const config::Config> config;
  std::shared_ptr<const policy::Policy> policy;
  // sandbox id -> SHA-256 of its token (compared in constant time). Both maps share what a
  // reload did not change with the previous snapshot's.
  common::ShardedStringMap<std::string> token_digests;
  // source address -> sandbox id, for transparent and DNS listeners.
  common::ChunkedMap<policy::IpAddress, std::string> sandbox_by_source;
  // Which credential each sandbox's intercepted requests get ([[...inject]] rules), and the
  // placeholders its environment holds for them; null when the config has no credentials.
  std::shared_ptr<const secrets::InjectionTable> injection;
  std::shared_ptr<const secrets::PlaceholderIndex> placeholders;

  // The sandbox a transparent or DNS client is, by its source address; null when none.
  const std::string* sandbox_for(const policy::IpAddress& source) const {
    return sandbox_by_source.find(source);
  }
};

struct Session;

// Connection counts, total and per sandbox. Lock-free on the hot path: a sandbox's counter is
// created on first use under a mutex and never removed, so a pointer to it stays valid.
class ConnectionCounter {
 public:
  std::atomic<std::size_t>& for_sandbox(const std::string& id);

  // A connection that has not named its sandbox yet, as the pending pool knows it: who to end
  // (on its own worker) when the pool needs its place, and since when it has waited.
  struct PendingHolder {
    std::weak_ptr<Session> session;
    asio::any_io_executor executor;
    std::chrono::steady_clock::time_point since{};
  };
  // How long a pending connection may stay silent before the source cap counts it. An honest
  // burst (a pool or wrk opening 256 connections, then writing each request) has connections
  // that are silent for a few milliseconds; ending them for the cap would refuse every
  // request of the burst beyond it.
  static constexpr std::chrono::milliseconds kSourceCapGrace{1000};
  // Takes a place in the pending pool for `holder` (from `source`) and returns its ticket.
  // Never refuses the newcomer: when the source already holds `source_cap` and its oldest
  // pending connection has waited kSourceCapGrace, that one is ended; when the pool holds
  // `total_cap`, the oldest of the source holding the most is, however young. An ended
  // connection loses its place at once (the newcomer has it) and is told TOO_MANY_CONNECTIONS
  // on its worker (Session::evict).
  std::uint64_t enter_pending(
      const std::string& source, PendingHolder holder, std::size_t total_cap,
      std::size_t source_cap,
      std::chrono::steady_clock::time_point now = std::chrono::steady_clock::now());
  // Gives a place back; nothing when the ticket was evicted.
  void leave_pending(const std::string& source, std::uint64_t ticket);

  std::atomic<std::size_t> total{0};    // every open session (shutdown waits for 0)
  std::atomic<std::size_t> bound{0};    // sessions bound to a sandbox: max_connections
  std::atomic<std::size_t> pending{0};  // not bound yet: max_unauthenticated_connections

 private:
  // Takes the oldest pending connection of `at` out of the pool; returns who to end.
  PendingHolder take_oldest(
      std::unordered_map<std::string, std::map<std::uint64_t, PendingHolder>>::iterator at);

  std::mutex mutex_;
  std::unordered_map<std::string, std::unique_ptr<std::atomic<std::size_t>>> by_sandbox_;
  std::mutex pending_mutex_;
  // source -> its pending connections by ticket (oldest first); no empty entries.
  std::unordered_map<std::string, std::map<std::uint64_t, PendingHolder>> pending_by_source_;
  std::uint64_t next_ticket_ = 1;
};

// A connection's place among those that have not authenticated yet (per source address and
// in total), so that they cannot take the capacity of sandboxes that have, nor hold more than
// their share of descriptors. Given back when the connection binds its sandbox or closes;
// taken away when the pool evicts it (ConnectionCounter::enter_pending).
class PendingSlot {
 public:
  PendingSlot() = default;
  ~PendingSlot() { release(); }
  PendingSlot(const PendingSlot&) = delete;
  PendingSlot& operator=(const PendingSlot&) = delete;

  void enter(ConnectionCounter& counter, std::string source,
             ConnectionCounter::PendingHolder holder, std::size_t total_cap,
             std::size_t source_cap);
  void release();

 private:
  ConnectionCounter* counter_ = nullptr;
  std::string source_;
  std::uint64_t ticket_ = 0;
};

// The most unauthenticated connections the pool holds: the configured cap, and never more
// than a quarter of the process's descriptor limit as it is now (so silent connections cannot
// use up the descriptors that authenticated ones and their upstreams need).
std::size_t pending_cap(std::size_t configured);

struct Interception;

// What every worker shares. Owned by the Server; sessions hold a shared_ptr.
struct Shared {
  std::atomic<std::shared_ptr<const Snapshot>> snapshot;
  std::shared_ptr<telemetry::AuditLog> audit;
  std::shared_ptr<telemetry::Metrics> metrics;
  ConnectionCounter connections;  // DNS-over-TCP clients included
  // Upstream lookups each sandbox has waiting on the DNS listener
  // (limits.max_dns_queries_per_sandbox).
  ConnectionCounter dns_queries;
  // Refusals that come in floods (over a DNS budget) are audited once per burst.
  AuditBursts audit_bursts;
  DnsMemory dns_memory;
  // Refusals per sandbox, for GET /sandboxes/ID/denials (bounded; a reload drops the counts
  // of sandboxes it no longer has).
  DenialCounts denials;
  Holds holds;  // destinations held for an operator's answer (unlisted = "hold")
  // How the config's reloads went (GET /sandboxes/ID's `reload`).
  ReloadStatus reloads;
  // The addresses of this host's interfaces, kept current by HostAddressWatch (never null
  // once the server runs). Never a destination unless allow_host_services opens one.
  std::atomic<std::shared_ptr<const policy::AddressSet>> host_addresses{
      std::make_shared<const policy::AddressSet>()};
  std::atomic<bool> ready{false};
  // TLS interception (the CA's leaves, the upstream TLS context); null when it is off.
  std::shared_ptr<Interception> interception;
  // Every credential's tokens, for the daemon's life (a reload updates its specs and keeps
  // the tokens of credentials that did not change).
  std::shared_ptr<secrets::CredentialStore> credentials;

  std::shared_ptr<const Snapshot> current() const {
    return snapshot.load(std::memory_order_acquire);
  }
};

// The sessions alive on one worker, so shutdown can close them. Touched only on that
// worker's thread.
struct SessionRegistry {
  std::unordered_set<Session*> live;
};

// Per worker thread: the shared state plus what must not cross threads. The worker owns the
// resolver and the registry and outlives every session it runs.
class UpstreamPool;
class SharedH2Registry;

struct WorkerDeps {
  std::shared_ptr<Shared> shared;
  dns::Resolver* resolver = nullptr;
  SessionRegistry* sessions = nullptr;
  UpstreamPool* upstreams = nullptr;         // idle upstream connections of intercepted streams
  SharedH2Registry* h2_upstreams = nullptr;  // upstream HTTP/2 connections, shared per sandbox
};

// Builds a snapshot (hashes the tokens, compiles the policy with sandgate's own endpoints, the
// inject rules, and the placeholder index with the key in credentials.placeholder_key_file,
// created when missing: throws std::runtime_error naming the file when that fails).
// `previous`: the snapshot whose config `cfg` was reloaded from; when cfg->changes says
// what changed (config::reload_config), only the changed sandboxes are compiled and hashed,
// the rest shared or copied from `previous`. `self` must be what `previous` was built with.
std::shared_ptr<const Snapshot> make_snapshot(std::shared_ptr<const config::Config> cfg,
                                              std::vector<policy::Endpoint> self,
                                              const Snapshot* previous = nullptr);

// Converts between Asio and policy address types.
policy::IpAddress to_policy(const asio::ip::address& a);
asio::ip::address to_asio(const policy::IpAddress& a);
// Asio's text for an address (address::to_string), without its inet_ntop, which formats an
// IPv4 address with sprintf (about 1,700 instructions, per connection).
std::string address_text(const asio::ip::address& a);

}  // namespace sandgate::proxy
