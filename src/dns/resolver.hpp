#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/errc.hpp"
#include "dns/message.hpp"
#include "policy/ip_address.hpp"

namespace sandgate::dns {

// How a Resolver finds and remembers answers. Validated by the Resolver constructor.
struct ResolverOptions {
  // "ip", "ip:port" or "[v6]:port" (a bare IPv6 address also works). Empty: the servers in
  // /etc/resolv.conf. /etc/hosts is never consulted; use `hosts`.
  std::vector<std::string> servers;
  // Deadline for a whole lookup (both address families, every retry).
  std::chrono::milliseconds timeout{5000};
  // Cache bound: an answer is kept for min(record TTL, max_ttl).
  std::chrono::seconds max_ttl{300};
  // NXDOMAIN and "no addresses" are cached this long at most (0 disables negative caching),
  // and shorter when the reply's SOA says so (min of its TTL and MINIMUM, RFC 2308).
  std::chrono::seconds negative_ttl{5};
  // Static answers, checked before anything else; never cached, never expire (reported with
  // ttl = max_ttl). Keys are compared after lowercasing and dropping one trailing dot. An empty
  // list makes the name fail with upstream_dns_failed, without a query.
  std::map<std::string, std::vector<policy::IpAddress>> hosts;
  std::size_t max_cache_entries = 10000;
  // Clock for cache expiry only (tests inject a manual one). Empty: steady_clock::now.
  // Deadlines always use real steady_timer time.
  std::function<std::chrono::steady_clock::time_point()> now;
};

// Addresses for one name: IPv4 first, then IPv6, each in server order, no duplicates.
struct Answer {
  // Set only by lookup() and lookup_now(): upstream said, for both families, that the name does
  // not exist (NXDOMAIN), or that it exists without A or AAAA records (NODATA). `addresses`
  // is empty then and `ttl` is how much longer the negative answer may be used.
  enum class Negative { none, nxdomain, nodata };

  std::vector<policy::IpAddress> addresses;
  std::chrono::seconds ttl{0};  // how much longer the answer may be used
  bool from_cache = false;
  Negative negative = Negative::none;
  // The SOA of the negative reply (both families negative), or of the family that had no
  // records when the other had some; its ttl already counts down with the cache entry.
  std::optional<Soa> soa;
};

// Counters for metrics; monotonic over the Resolver's life.
struct ResolverStats {
  std::uint64_t lookups = 0;           // resolve() calls
  std::uint64_t cache_hits = 0;        // answered from the cache, positive or negative
  std::uint64_t failures = 0;          // resolve() calls that returned an error
  std::uint64_t upstream_queries = 0;  // DNS questions handed to c-ares (two per fresh lookup)
};

// Asynchronous A+AAAA resolver: c-ares driven by an Asio executor, with a TTL-bounded cache and
// single-flight deduplication of concurrent lookups.
//
// One per worker io_context (a c-ares channel is not thread-safe): construct, call, and destroy
// it on that context's thread. Destroying it cancels pending lookups: their coroutines resume
// with std::errc::operation_canceled and never touch the destroyed Resolver.
class Resolver {
 public:
  // Throws std::runtime_error when options are invalid or c-ares cannot start (startup only).
  Resolver(boost::asio::any_io_executor ex, ResolverOptions opts);
  ~Resolver();
  Resolver(const Resolver&) = delete;
  Resolver& operator=(const Resolver&) = delete;

  // `name` must already be normalised (lowercase, no trailing dot). An IPv4 or IPv6 literal is
  // returned as is. Sends the A and AAAA queries at once; the answer's TTL is the smallest record
  // TTL, capped by max_ttl. Concurrent calls for one name share one pair of upstream queries and
  // one deadline. Errors: Errc::upstream_dns_failed (NXDOMAIN, no addresses, SERVFAIL, refused,
  // malformed reply), Errc::upstream_timeout (deadline passed with no address at all; if one
  // family answered in time, its addresses are returned), std::errc::operation_canceled (the
  // Resolver was destroyed, or the awaiting coroutine was cancelled).
  boost::asio::awaitable<Result<Answer>> resolve(std::string name);

  // Like resolve(), but a definitive negative answer (NXDOMAIN, or NODATA for both families)
  // is a value with Answer::negative set, not an error: for the DNS listener, which passes it
  // on as such. Other failures are the same errors as resolve()'s.
  boost::asio::awaitable<Result<Answer>> lookup(std::string name);
  // lookup()'s answer_now().
  std::optional<Result<Answer>> lookup_now(const std::string& name);

  // What resolve() would return without asking upstream (static hosts, literals, invalid
  // names, the cache, positive or negative), or nullopt when only an upstream query can
  // tell. Counted in stats() like a resolve() call when it answers. Never waits.
  std::optional<Result<Answer>> answer_now(const std::string& name);

  [[nodiscard]] ResolverStats stats() const;

  // Called once per lookup that went upstream (started or joined a query; not cache hits,
  // static hosts or literals) with its latency and whether it produced addresses. Runs on the
  // executor's thread, never after the Resolver is destroyed. May be empty.
  std::function<void(std::chrono::nanoseconds latency, bool ok)> on_lookup;

 private:
  class Impl;
  std::shared_ptr<Impl> impl_;  // shared with in-flight coroutine frames
};

}  // namespace sandgate::dns
