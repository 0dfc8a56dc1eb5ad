#include "proxy/upstream_pool.hpp"

#include "proxy/session.hpp"

namespace sandgate::proxy {

namespace {

using Clock = std::chrono::steady_clock;

std::string key_of(const Session& s, const std::string& authority) {
  std::string key = s.sandbox;
  key += '\n';
  key += authority;
  return key;
}

}  // namespace

UpstreamPool::UpstreamPool() = default;
UpstreamPool::~UpstreamPool() = default;

void UpstreamPool::put(const Session& s, std::unique_ptr<UpstreamConn> conn) {
  const config::Limits& limits = s.limits();
  const auto now = Clock::now();
  sweep(now);
  if (closed_ || !conn || !conn->tls || !conn->idle || s.aborted || s.sandbox.empty() ||
      limits.upstream_keepalive.count() == 0 || size_ >= limits.max_idle_upstream_connections ||
      !upstream_reusable(*conn)) {
    return;  // closed as it goes
  }
  by_key_[key_of(s, conn->authority)].push_back(
      {s.snap, std::move(conn), now + limits.upstream_keepalive});
  ++size_;
}

std::unique_ptr<UpstreamConn> UpstreamPool::take(const Session& s, const std::string& authority) {
  if (size_ == 0) return nullptr;
  const auto it = by_key_.find(key_of(s, authority));
  if (it == by_key_.end()) return nullptr;
  const auto now = Clock::now();
  std::unique_ptr<UpstreamConn> found;
  auto& entries = it->second;
  while (!entries.empty() && !found) {
    Entry e = std::move(entries.back());
    entries.pop_back();
    --size_;
    if (e.snap == s.snap && now < e.until && upstream_reusable(*e.conn)) found = std::move(e.conn);
  }
  if (entries.empty()) by_key_.erase(it);
  return found;
}

void UpstreamPool::close_all() {
  closed_ = true;
  by_key_.clear();
  size_ = 0;
}

void UpstreamPool::sweep(Clock::time_point now) {
  if (now < next_sweep_) return;
  next_sweep_ = now + std::chrono::seconds(1);
  for (auto it = by_key_.begin(); it != by_key_.end();) {
    auto& entries = it->second;
    const auto before = entries.size();
    std::erase_if(entries,
                  [&](const Entry& e) { return now >= e.until || !upstream_reusable(*e.conn); });
    size_ -= before - entries.size();
    it = entries.empty() ? by_key_.erase(it) : std::next(it);
  }
}

}  // namespace sandgate::proxy
