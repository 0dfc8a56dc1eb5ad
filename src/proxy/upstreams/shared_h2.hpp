#pragma once

// Per worker: sandgate's upstream HTTP/2 connections of intercepted HTTP/2 client connections,
// shared by the client connections of one sandbox to one destination (never between
// sandboxes, never across a reload), so that the TLS set-up to the destination is paid once
// rather than per client connection, and its streams are spread over as few connections as
// its SETTINGS_MAX_CONCURRENT_STREAMS allows.
//
// - A stream takes the connection its client connection's last stream took, while it has
//   room; else the least busy with room; when every one is full, a new one is dialled, but never
//   more connections than client connections use them (so one sandbox holds no more upstream
//   connections than before sharing: THREATS 31); past that, the stream waits for a slot on the
//   least busy one.
// - When the last client connection leaves, one connection is kept idle for [limits]
//   upstream_keepalive_ms (within max_idle_upstream_connections, counted apart from the
//   worker's HTTP/1.1 pool; both in sandgate_upstream_pool_connections); the rest close.
// - A connection is closed by the registry alone (surplus, expired, the worker stopping):
//   one client connection's deadline or abort resets its own streams on it, never the
//   connection (the session does that: Session::abort does not reach it).
// Touched only on its worker's thread.

#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "h2/connection.hpp"

namespace sandgate::telemetry {
class Metrics;
}

namespace sandgate::proxy {

struct Session;
struct Snapshot;
struct UpstreamConn;

using UpstreamH2Stream = boost::asio::ssl::stream<boost::asio::ip::tcp::socket&>;

// One upstream HTTP/2 connection; it lives while the registry keeps it or its run() goes on.
struct SharedH2 {
  explicit SharedH2(std::unique_ptr<UpstreamConn> c);
  ~SharedH2();
  SharedH2(const SharedH2&) = delete;
  SharedH2& operator=(const SharedH2&) = delete;

  // Still taking new streams: running, no GOAWAY from the destination.
  bool usable() const;
  bool has_room() const { return usable() && streams < client.stream_limit(); }
  // GOAWAY and the transport closed: run() ends soon after, every stream on it fails.
  void close();

  std::unique_ptr<UpstreamConn> conn;
  h2::ClientConnection<UpstreamH2Stream> client;
  std::size_t streams = 0;  // streams leased (open, or waiting to open)
  bool running = false;
  bool closed = false;
};

class SharedH2Registry;

// The connections of one sandbox to one destination on one config snapshot.
class H2Origin {
 public:
  // The usable connection with room for one more stream that has the fewest, or null.
  std::shared_ptr<SharedH2> with_room() const;
  // The usable connection with the fewest streams, or null.
  std::shared_ptr<SharedH2> least_busy() const;
  // Whether a stream that found no room may dial one more connection.
  bool may_dial() const { return conns_.size() + dialing_ < sessions_; }
  bool dialling() const { return dialing_ > 0; }
  // Completes when a dial in progress ends (whatever came of it).
  boost::asio::awaitable<void> dial_ended();

 private:
  friend class SharedH2Registry;
  std::shared_ptr<const Snapshot> snap_;
  std::vector<std::shared_ptr<SharedH2>> conns_;         // first opened first
  std::size_t sessions_ = 0;                             // client connections using them
  std::size_t dialing_ = 0;                              // streams dialling one more
  std::optional<boost::asio::steady_timer> dial_ended_;  // cancelled as each dial ends
  std::chrono::steady_clock::time_point idle_until_{};
  bool idle_counted_ = false;  // kept idle, counted in the pool gauge
};

class SharedH2Registry {
 public:
  // `metrics` (may be null) gets the idle connections kept in sandgate_upstream_pool_connections.
  explicit SharedH2Registry(telemetry::Metrics* metrics = nullptr);
  ~SharedH2Registry();
  SharedH2Registry(const SharedH2Registry&) = delete;
  SharedH2Registry& operator=(const SharedH2Registry&) = delete;

  class Lease;
  // A client connection's part in its sandbox's connections to one destination: it counts
  // as one of their users while it lives.
  class Share {
   public:
    Share(SharedH2Registry& registry, std::shared_ptr<H2Origin> origin);
    ~Share();
    Share(const Share&) = delete;
    Share& operator=(const Share&) = delete;
    H2Origin& origin() const { return *origin_; }
    // The connection this client connection's last stream went over, while it has room: its
    // next stream goes there too, so that what one read from the destination brings is for
    // few client connections (each then gets fuller writes).
    std::shared_ptr<SharedH2> last_with_room() const;
    // Adds `conn` (TLS done, ALPN chose h2) to the connections and starts it; null when the
    // registry is closed (the worker is stopping).
    std::shared_ptr<SharedH2> add(std::unique_ptr<UpstreamConn> conn);

    // A stream dialling one more connection, counted while it lives (H2Origin::may_dial).
    class Dialing {
     public:
      explicit Dialing(const Share& share);
      ~Dialing();
      Dialing(const Dialing&) = delete;
      Dialing& operator=(const Dialing&) = delete;

     private:
      std::shared_ptr<H2Origin> origin_;
    };

   private:
    friend class Lease;
    SharedH2Registry& registry_;
    std::shared_ptr<H2Origin> origin_;
    std::weak_ptr<SharedH2> last_;
  };

  // A stream's use of one connection: counted in its streams while it lives; a connection
  // past what its users need is closed once its last stream is done.
  class Lease {
   public:
    Lease(Share& share, std::shared_ptr<SharedH2> conn);
    ~Lease();
    Lease(Lease&&) = delete;
    Lease& operator=(Lease&&) = delete;
    h2::ClientConnection<UpstreamH2Stream>& client() const { return conn_->client; }

   private:
    SharedH2Registry& registry_;
    std::shared_ptr<H2Origin> origin_;
    std::shared_ptr<SharedH2> conn_;
  };

  // `s`'s part in the connections of its sandbox to `authority` (upstream_authority) on its
  // snapshot, of which there may be none yet; null when the registry is closed or `s` has no
  // sandbox.
  std::unique_ptr<Share> share(const Session& s, const std::string& authority);

  // Closes the idle connections whose keep-alive ended, or that were kept under another
  // snapshot than `current` (a reload: they can never be used again); the worker calls it
  // every second.
  void expire(const Snapshot* current);
  // Closes every connection; later ones are closed as they come (worker shutdown, on the
  // worker's thread and before its io_context goes: the destructor closes nothing).
  void close_all();

 private:
  // Closes connections beyond what the users need that carry no stream; when the last user
  // left, keeps one idle for the keep-alive (or none).
  void settle(H2Origin& origin);
  // Drops connections that ended; closes idle ones past their keep-alive or kept under
  // another snapshot than `current` (when not null).
  void sweep(std::chrono::steady_clock::time_point now, const Snapshot* current = nullptr);
  // Closes and forgets the connections that take no more streams and carry none.
  void drop_ended(H2Origin& origin);
  // Closes and forgets all of them (those with streams fail them).
  void close_conns(H2Origin& origin);
  void count_idle(H2Origin& origin, bool idle);
  std::shared_ptr<SharedH2> launch(H2Origin& origin, std::unique_ptr<UpstreamConn> conn);

  telemetry::Metrics* metrics_ = nullptr;
  std::unordered_map<std::string, std::shared_ptr<H2Origin>> by_key_;
  std::size_t idle_ = 0;
  bool closed_ = false;
};

}  // namespace sandgate::proxy
