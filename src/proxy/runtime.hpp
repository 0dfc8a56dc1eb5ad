#pragma once

#include <atomic>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "config/config.hpp"
#include "dns/resolver.hpp"
#include "policy/policy.hpp"
#include "proxy/audit_bursts.hpp"
#include "proxy/dns_memory.hpp"
#include "telemetry/audit_log.hpp"
#include "telemetry/metrics.hpp"

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
  // sandbox id -> SHA-256 of its token (compared in constant time).
  std::unordered_map<std::string, std::string> token_digests;
  // source address -> sandbox id, for transparent and DNS listeners.
  std::map<policy::IpAddress, std::string> sandbox_by_source;

  // The sandbox a transparent or DNS client is, by its source address; null when none.
  const std::string* sandbox_for(const policy::IpAddress& source) const {
    const auto it = sandbox_by_source.find(source);
    return it == sandbox_by_source.end() ? nullptr : &it->second;
  }
};

// Connection counts, total and per sandbox. Lock-free on the hot path: a sandbox's counter is
// created on first use under a mutex and never removed, so a pointer to it stays valid.
class ConnectionCounter {
 public:
  std::atomic<std::size_t>& for_sandbox(const std::string& id);
  std::atomic<std::size_t> total{0};

 private:
  std::mutex mutex_;
  std::unordered_map<std::string, std::unique_ptr<std::atomic<std::size_t>>> by_sandbox_;
};

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
  // Ports of listeners bound to 0.0.0.0 or ::: any local address on them is sandgate itself,
  // including addresses added after start (checked at dial time).
  std::vector<std::uint16_t> wildcard_listener_ports;
  std::atomic<bool> ready{false};

  std::shared_ptr<const Snapshot> current() const {
    return snapshot.load(std::memory_order_acquire);
  }
};

struct Session;

// The sessions alive on one worker, so shutdown can close them. Touched only on that
// worker's thread.
struct SessionRegistry {
  std::unordered_set<Session*> live;
};

// Per worker thread: the shared state plus what must not cross threads. The worker owns the
// resolver and the registry and outlives every session it runs.
struct WorkerDeps {
  std::shared_ptr<Shared> shared;
  dns::Resolver* resolver = nullptr;
  SessionRegistry* sessions = nullptr;
};

// SHA-256 of data, raw bytes.
std::string sha256(std::string_view data);

// Builds a snapshot (hashes the tokens, compiles the policy with sandgate's own endpoints).
std::shared_ptr<const Snapshot> make_snapshot(std::shared_ptr<const config::Config> cfg,
                                              std::vector<policy::Endpoint> self);

// Converts between Asio and policy address types.
policy::IpAddress to_policy(const asio::ip::address& a);
asio::ip::address to_asio(const policy::IpAddress& a);

}  // namespace sandgate::proxy
