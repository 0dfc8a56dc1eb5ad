#pragma once

// Per worker: sandgate's own upstream TLS connections of intercepted streams that are idle
// between two responses, kept after the client connection that opened them has ended, so
// that the next client connection of the same sandbox to the same destination skips the dial
// and the upstream handshake (a new intercepted connection then costs only its client leg).
//
// A connection is reused only by the same sandbox, for the same host and port, on the same
// config snapshot (a reload starts afresh), within [limits] upstream_keepalive_ms, and only
// once the request that wants it was decided on its own. Touched only on its worker's thread.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

namespace sandgate::telemetry {
class Metrics;
}

namespace sandgate::proxy {

struct Session;
struct Snapshot;
struct UpstreamConn;

// Whose upstream connection a kept one is: `s`'s sandbox's, to `authority`.
std::string upstream_key(const Session& s, const std::string& authority);

class UpstreamPool {
 public:
  // `metrics` (may be null) gets the pool's size as sandgate_upstream_pool_connections, summed
  // over the workers' pools; it must outlive the pool.
  explicit UpstreamPool(telemetry::Metrics* metrics = nullptr);
  ~UpstreamPool();
  UpstreamPool(const UpstreamPool&) = delete;
  UpstreamPool& operator=(const UpstreamPool&) = delete;

  // Keeps `conn` (intercepted, idle at a message boundary) for `s`'s sandbox and the
  // authority it serves, or closes it when pooling is off, the pool is full, or the
  // destination closed it.
  void put(const Session& s, std::unique_ptr<UpstreamConn> conn);
  // A kept connection of `s`'s sandbox to `authority` (upstream_authority) that still looks
  // usable, or null.
  std::unique_ptr<UpstreamConn> take(const Session& s, const std::string& authority);

  // Closes what expired or the destination closed. put() does it too, but only when a
  // connection comes back: without this an idle worker would keep them, with their
  // descriptors and the config snapshots they were kept under, until the next one did.
  // The worker calls it every second.
  void expire();

  // Closes every kept connection; later ones are closed as they come (worker shutdown).
  void close_all();

  std::size_t size() const { return size_; }

 private:
  struct Entry {
    std::shared_ptr<const Snapshot> snap;
    std::unique_ptr<UpstreamConn> conn;
    std::chrono::steady_clock::time_point until;
  };
  // Closes what expired or the destination closed; drops emptied keys.
  void sweep(std::chrono::steady_clock::time_point now);
  // Sets size_ and moves the metrics gauge by the difference.
  void resize(std::size_t n);

  telemetry::Metrics* metrics_ = nullptr;
  std::unordered_map<std::string, std::vector<Entry>> by_key_;  // most recent last
  std::size_t size_ = 0;
  bool closed_ = false;
  std::chrono::steady_clock::time_point next_sweep_{};
};

}  // namespace sandgate::proxy
