#include "proxy/upstreams/pool.hpp"

#include "proxy/session.hpp"
#include "telemetry/metrics.hpp"

namespace sandgate::proxy {

namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

std::string upstream_key(const Session& s, const std::string& authority) {
  std::string key = s.sandbox;
  key += '\n';
  key += authority;
  return key;
}

UpstreamPool::UpstreamPool(telemetry::Metrics* metrics) : metrics_(metrics) {}
UpstreamPool::~UpstreamPool() {
  resize(0);
}

void UpstreamPool::resize(std::size_t n) {
  if (metrics_ != nullptr && n != size_) {
    metrics_->upstream_pool_changed(static_cast<double>(n) - static_cast<double>(size_));
  }
  size_ = n;
}

void UpstreamPool::put(const Session& s, std::unique_ptr<UpstreamConn> conn) {
  const config::Limits& limits = s.limits();
  const auto now = Clock::now();
  sweep(now);
  if (closed_ || !conn || !conn->tls || !conn->idle || s.aborted || s.sandbox.empty() ||
      limits.upstream_keepalive.count() == 0 || size_ >= limits.max_idle_upstream_connections ||
      !upstream_reusable(*conn)) {
    return;  // closed as it goes
  }
  by_key_[upstream_key(s, conn->authority)].push_back(
      {s.snap, std::move(conn), now + limits.upstream_keepalive});
  resize(size_ + 1);
}

std::unique_ptr<UpstreamConn> UpstreamPool::take(const Session& s, const std::string& authority) {
  if (size_ == 0) return nullptr;
  const auto it = by_key_.find(upstream_key(s, authority));
  if (it == by_key_.end()) return nullptr;
  const auto now = Clock::now();
  std::unique_ptr<UpstreamConn> found;
  auto& entries = it->second;
  while (!entries.empty() && !found) {
    Entry e = std::move(entries.back());
    entries.pop_back();
    resize(size_ - 1);
    if (e.snap == s.snap && now < e.until && upstream_reusable(*e.conn)) found = std::move(e.conn);
  }
  if (entries.empty()) by_key_.erase(it);
  return found;
}

void UpstreamPool::expire() {
  sweep(Clock::now());
}

void UpstreamPool::close_all() {
  closed_ = true;
  by_key_.clear();
  resize(0);
}

void UpstreamPool::sweep(Clock::time_point now) {
  if (now < next_sweep_) return;
  next_sweep_ = now + std::chrono::seconds(1);
  for (auto it = by_key_.begin(); it != by_key_.end();) {
    auto& entries = it->second;
    const auto before = entries.size();
    std::erase_if(entries,
                  [&](const Entry& e) { return now >= e.until || !upstream_reusable(*e.conn); });
    resize(size_ - (before - entries.size()));
    it = entries.empty() ? by_key_.erase(it) : std::next(it);
  }
}

}  // namespace sandgate::proxy
