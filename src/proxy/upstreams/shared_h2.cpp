#include "proxy/upstreams/shared_h2.hpp"

#include <algorithm>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "proxy/runtime.hpp"
#include "proxy/session.hpp"
#include "proxy/tls_streams.hpp"
#include "proxy/upstreams/pool.hpp"
#include "telemetry/metrics.hpp"

namespace sandgate::proxy {

namespace {

using Clock = std::chrono::steady_clock;

// The snapshot is part of the key: connections opened under one config are never used under
// another (the origin holds its snapshot, so the address is not reused while it lives).
std::string key_of(const Session& s, const std::string& authority) {
  std::string key = upstream_key(s, authority);
  key += '\n';
  key += std::to_string(reinterpret_cast<std::uintptr_t>(s.snap.get()));
  return key;
}

}  // namespace

// A shared connection carries the streams of several client connections: OpenSSL keeps its
// record buffers (about 33 KiB) instead of freeing them whenever they are empty and allocating
// them again for the next record (Asio sets SSL_MODE_RELEASE_BUFFERS on every stream, which
// suits the many idle ones). Shared connections are fewer than the client connections that use
// them, and idle ones are bounded by max_idle_upstream_connections.
SharedH2::SharedH2(std::unique_ptr<UpstreamConn> c)
    : conn(std::move(c)), client(conn->tls->stream) {
  SSL_clear_mode(conn->tls->stream.native_handle(), SSL_MODE_RELEASE_BUFFERS);
}
SharedH2::~SharedH2() = default;

bool SharedH2::usable() const {
  return running && !closed && !client.ended() && !client.goaway_received();
}

void SharedH2::close() {
  if (closed) return;
  closed = true;
  client.shutdown();
  client.abort();
}

std::shared_ptr<SharedH2> H2Origin::with_room() const {
  std::shared_ptr<SharedH2> best;
  for (const auto& c : conns_) {
    if (c->has_room() && (!best || c->streams < best->streams)) best = c;
  }
  return best;
}

std::shared_ptr<SharedH2> H2Origin::least_busy() const {
  std::shared_ptr<SharedH2> best;
  for (const auto& c : conns_) {
    if (c->usable() && (!best || c->streams < best->streams)) best = c;
  }
  return best;
}

boost::asio::awaitable<void> H2Origin::dial_ended() {
  if (!dial_ended_) {
    dial_ended_.emplace(co_await boost::asio::this_coro::executor,
                        std::chrono::steady_clock::time_point::max());
  }
  co_await dial_ended_->async_wait(boost::asio::as_tuple(boost::asio::use_awaitable));
}

SharedH2Registry::SharedH2Registry(telemetry::Metrics* metrics) : metrics_(metrics) {}

SharedH2Registry::~SharedH2Registry() {
  if (metrics_ != nullptr && idle_ > 0)
    metrics_->upstream_pool_changed(-static_cast<double>(idle_));
}

SharedH2Registry::Share::Share(SharedH2Registry& registry, std::shared_ptr<H2Origin> origin)
    : registry_(registry), origin_(std::move(origin)) {
  ++origin_->sessions_;
  registry_.count_idle(*origin_, false);
}

SharedH2Registry::Share::~Share() {
  --origin_->sessions_;
  registry_.settle(*origin_);
}

std::shared_ptr<SharedH2> SharedH2Registry::Share::add(std::unique_ptr<UpstreamConn> conn) {
  if (registry_.closed_) return nullptr;
  return registry_.launch(*origin_, std::move(conn));
}

SharedH2Registry::Share::Dialing::Dialing(const Share& share) : origin_(share.origin_) {
  ++origin_->dialing_;
}
SharedH2Registry::Share::Dialing::~Dialing() {
  --origin_->dialing_;
  if (origin_->dial_ended_) origin_->dial_ended_->cancel();
}

std::shared_ptr<SharedH2> SharedH2Registry::Share::last_with_room() const {
  std::shared_ptr<SharedH2> last = last_.lock();
  return last && last->has_room() ? last : nullptr;
}

SharedH2Registry::Lease::Lease(Share& share, std::shared_ptr<SharedH2> conn)
    : registry_(share.registry_), origin_(share.origin_), conn_(std::move(conn)) {
  ++conn_->streams;
  share.last_ = conn_;
}

SharedH2Registry::Lease::~Lease() {
  --conn_->streams;
  registry_.settle(*origin_);
}

std::unique_ptr<SharedH2Registry::Share> SharedH2Registry::share(const Session& s,
                                                                 const std::string& authority) {
  if (closed_ || s.sandbox.empty()) return nullptr;
  std::shared_ptr<H2Origin>& origin = by_key_[key_of(s, authority)];
  if (!origin) {
    origin = std::make_shared<H2Origin>();
    origin->snap_ = s.snap;
  }
  return std::make_unique<Share>(*this, origin);
}

std::shared_ptr<SharedH2> SharedH2Registry::launch(H2Origin& origin,
                                                   std::unique_ptr<UpstreamConn> conn) {
  auto shared = std::make_shared<SharedH2>(std::move(conn));
  shared->running = true;
  origin.conns_.push_back(shared);
  // The coroutine holds the connection it drives until it ends.
  boost::asio::co_spawn(shared->conn->socket.get_executor(), shared->client.run(),
                        [shared](std::exception_ptr, h2::error_code) { shared->running = false; });
  return shared;
}

void SharedH2Registry::settle(H2Origin& origin) {
  if (closed_) return;  // close_all() closed them all
  drop_ended(origin);
  // Beyond one connection per user (at least one), those without a stream close, the last
  // opened first.
  const std::size_t wanted = std::max<std::size_t>(origin.sessions_, 1);
  for (std::size_t i = origin.conns_.size(); i-- > 0 && origin.conns_.size() > wanted;) {
    if (origin.conns_[i]->streams != 0) continue;
    origin.conns_[i]->close();
    origin.conns_.erase(origin.conns_.begin() + static_cast<std::ptrdiff_t>(i));
  }
  if (origin.sessions_ > 0 || origin.idle_counted_ || origin.conns_.empty()) return;
  // The last user left. One connection waits for the next (its streams, if any, finish).
  const config::Limits& limits = origin.snap_->config->limits;
  if (limits.upstream_keepalive.count() == 0 || idle_ >= limits.max_idle_upstream_connections) {
    return close_conns(origin);
  }
  origin.idle_until_ = Clock::now() + limits.upstream_keepalive;
  count_idle(origin, true);
}

void SharedH2Registry::drop_ended(H2Origin& origin) {
  std::erase_if(origin.conns_, [](const std::shared_ptr<SharedH2>& c) {
    if (c->usable() || c->streams != 0) return false;
    c->close();  // a GOAWAY from the destination: its transport too
    return true;
  });
}

void SharedH2Registry::close_conns(H2Origin& origin) {
  for (const auto& c : origin.conns_) c->close();
  origin.conns_.clear();
}

void SharedH2Registry::count_idle(H2Origin& origin, bool idle) {
  if (origin.idle_counted_ == idle) return;
  origin.idle_counted_ = idle;
  idle_ = idle ? idle_ + 1 : idle_ - 1;
  if (metrics_ != nullptr) metrics_->upstream_pool_changed(idle ? 1.0 : -1.0);
}

void SharedH2Registry::sweep(Clock::time_point now, const Snapshot* current) {
  for (auto it = by_key_.begin(); it != by_key_.end();) {
    H2Origin& origin = *it->second;
    drop_ended(origin);
    const bool stale = current != nullptr && origin.snap_.get() != current;
    const bool expired = origin.sessions_ == 0 && (now >= origin.idle_until_ || closed_ || stale);
    if (expired) close_conns(origin);
    if (origin.sessions_ == 0 && origin.conns_.empty()) {
      count_idle(origin, false);
      it = by_key_.erase(it);
    } else {
      ++it;
    }
  }
}

void SharedH2Registry::expire(const Snapshot* current) {
  sweep(Clock::now(), current);
}

void SharedH2Registry::close_all() {
  closed_ = true;
  for (auto& [key, origin] : by_key_) close_conns(*origin);
  sweep(Clock::now());
}

}  // namespace sandgate::proxy
