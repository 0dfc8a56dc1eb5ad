#include "proxy/runtime.hpp"

#include <sys/resource.h>

#include <algorithm>
#include <boost/asio/post.hpp>
#include <memory>

#include "proxy/session.hpp"
#include "secrets/encoding.hpp"

namespace sandgate::proxy {

std::atomic<std::size_t>& ConnectionCounter::for_sandbox(const std::string& id) {
  std::lock_guard lock(mutex_);
  auto& slot = by_sandbox_[id];
  if (!slot) slot = std::make_unique<std::atomic<std::size_t>>(0);
  return *slot;
}

std::uint64_t ConnectionCounter::enter_pending(const std::string& source, PendingHolder holder,
                                               std::size_t total_cap, std::size_t source_cap,
                                               std::chrono::steady_clock::time_point now) {
  std::vector<PendingHolder> victims;
  std::uint64_t ticket = 0;
  holder.since = now;
  {
    std::lock_guard lock(pending_mutex_);
    auto own = pending_by_source_.find(source);
    // Tickets grow with time: the first of a source is its oldest. While it is young, so are
    // the rest, and the source cap waits (the total cap below still holds).
    while (own != pending_by_source_.end() && own->second.size() >= source_cap &&
           now - own->second.begin()->second.since >= kSourceCapGrace) {
      victims.push_back(take_oldest(own));
      own = pending_by_source_.find(source);
    }
    while (!pending_by_source_.empty() && pending.load() >= total_cap) {
      // The source holding the most; of equals, the one whose oldest waited longest.
      auto most = pending_by_source_.begin();
      for (auto it = most; it != pending_by_source_.end(); ++it) {
        const std::size_t n = it->second.size(), m = most->second.size();
        if (n > m || (n == m && it->second.begin()->first < most->second.begin()->first)) most = it;
      }
      victims.push_back(take_oldest(most));
    }
    ticket = next_ticket_++;
    pending_by_source_[source].emplace(ticket, std::move(holder));
    pending.fetch_add(1);
  }
  for (PendingHolder& victim : victims) {
    if (!victim.executor) continue;  // nobody to tell (the pool's unit tests)
    asio::post(victim.executor, [session = std::move(victim.session)] {
      if (const auto s = session.lock()) s->evict();
    });
  }
  return ticket;
}

ConnectionCounter::PendingHolder ConnectionCounter::take_oldest(
    std::unordered_map<std::string, std::map<std::uint64_t, PendingHolder>>::iterator at) {
  auto oldest = at->second.begin();
  PendingHolder holder = std::move(oldest->second);
  at->second.erase(oldest);
  if (at->second.empty()) pending_by_source_.erase(at);
  pending.fetch_sub(1);
  return holder;
}

void ConnectionCounter::leave_pending(const std::string& source, std::uint64_t ticket) {
  std::lock_guard lock(pending_mutex_);
  const auto it = pending_by_source_.find(source);
  if (it == pending_by_source_.end() || it->second.erase(ticket) == 0) return;  // evicted
  pending.fetch_sub(1);
  if (it->second.empty()) pending_by_source_.erase(it);
}

void PendingSlot::enter(ConnectionCounter& counter, std::string source,
                        ConnectionCounter::PendingHolder holder, std::size_t total_cap,
                        std::size_t source_cap) {
  release();
  source_ = std::move(source);
  ticket_ = counter.enter_pending(source_, std::move(holder), total_cap, source_cap);
  counter_ = &counter;
}

void PendingSlot::release() {
  if (counter_ == nullptr) return;
  counter_->leave_pending(source_, ticket_);
  counter_ = nullptr;
}

std::size_t pending_cap(std::size_t configured) {
  rlimit lim{};
  if (::getrlimit(RLIMIT_NOFILE, &lim) != 0 || lim.rlim_cur == RLIM_INFINITY) return configured;
  return std::max<std::size_t>(1, std::min(configured, static_cast<std::size_t>(lim.rlim_cur) / 4));
}

namespace {

// A sandbox without a token is reached only through its source addresses.
void add_identity(Snapshot& snap, const config::Sandbox& sb) {
  if (!sb.token.empty()) snap.token_digests.insert_or_assign(sb.spec.id, secrets::sha256(sb.token));
  for (const auto& source : sb.sources) snap.sandbox_by_source.insert_or_assign(source, sb.spec.id);
}

// The policy and identities of `previous`, with only cfg->changes applied: each shares
// every other sandbox's entries with `previous`.
void apply_changes(Snapshot& snap, const config::Config& cfg, const Snapshot& previous) {
  const config::SandboxChanges& changes = *cfg.changes;
  std::vector<policy::SandboxSpec> added;
  added.reserve(changes.added.size());
  for (const std::string& id : changes.added) added.push_back(cfg.find_sandbox(id)->spec);
  snap.policy =
      std::make_shared<const policy::Policy>(*previous.policy, changes.removed, std::move(added));
  snap.token_digests = previous.token_digests;
  snap.sandbox_by_source = previous.sandbox_by_source;
  for (const std::string& id : changes.removed) {
    snap.token_digests.erase(id);
    if (const config::Sandbox* old = previous.config->find_sandbox(id)) {
      for (const auto& source : old->sources) snap.sandbox_by_source.erase(source);
    }
  }
  for (const std::string& id : changes.added) add_identity(snap, *cfg.find_sandbox(id));
}

// The placeholders of cfg's sandboxes. With `previous` (cfg.changes is relative to its
// config) and the same key, its index with only the changed sandboxes' placeholders computed
// and the rest shared; otherwise computed whole.
std::shared_ptr<const secrets::PlaceholderIndex> placeholders_for(const config::Config& cfg,
                                                                  const Snapshot* previous) {
  if (previous != nullptr && previous->placeholders) {
    const auto key = secrets::PlaceholderKey::load_or_create(cfg.placeholder_key_file);
    if (key == previous->placeholders->key()) {
      auto index = std::make_shared<secrets::PlaceholderIndex>(*previous->placeholders);
      for (const std::string& id : cfg.changes->removed) {
        if (const config::Sandbox* old = previous->config->find_sandbox(id)) {
          for (const std::string& name : previous->config->credentials_of(*old)) {
            index->remove(id, name);
          }
        }
      }
      for (const std::string& id : cfg.changes->added) {
        for (const std::string& name : cfg.credentials_of(*cfg.find_sandbox(id))) {
          index->add(id, name);
        }
      }
      return index->size() > 0 ? std::move(index) : nullptr;
    }
  }
  const auto pairs = cfg.placeholder_pairs();
  if (pairs.empty()) return nullptr;
  return std::make_shared<const secrets::PlaceholderIndex>(
      secrets::PlaceholderKey::load_or_create(cfg.placeholder_key_file), pairs);
}

}  // namespace

std::shared_ptr<const Snapshot> make_snapshot(std::shared_ptr<const config::Config> cfg,
                                              std::vector<policy::Endpoint> self,
                                              const Snapshot* previous) {
  auto snap = std::make_shared<Snapshot>();
  if (previous != nullptr && cfg->changes) {
    apply_changes(*snap, *cfg, *previous);
  } else {
    snap->policy = cfg->build_policy(std::move(self));
    for (const config::Sandbox& sb : cfg->sandboxes) add_identity(*snap, sb);
  }
  if (!cfg->credentials.empty()) {
    // Only drop-ins changed: the credentials and profiles are `previous`'s.
    const Snapshot* base = previous != nullptr && cfg->changes ? previous : nullptr;
    snap->injection = cfg->build_injection(base != nullptr ? base->injection.get() : nullptr);
    snap->placeholders = placeholders_for(*cfg, base);
  }
  snap->config = std::move(cfg);
  return snap;
}

policy::IpAddress to_policy(const asio::ip::address& a) {
  if (a.is_v4()) return policy::IpAddress::v4(a.to_v4().to_uint());
  return policy::IpAddress::v6(a.to_v6().to_bytes());
}

std::string address_text(const asio::ip::address& a) {
  return a.is_v4() ? to_policy(a).to_string() : a.to_string();
}

asio::ip::address to_asio(const policy::IpAddress& a) {
  if (a.is_v4()) return asio::ip::address_v4(a.v4_value());
  return asio::ip::address_v6(a.bytes);
}

}  // namespace sandgate::proxy
