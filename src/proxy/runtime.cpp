#include "proxy/runtime.hpp"

#include <openssl/evp.h>
#include <openssl/sha.h>

#include <memory>

namespace sandgate::proxy {

std::atomic<std::size_t>& ConnectionCounter::for_sandbox(const std::string& id) {
  std::lock_guard lock(mutex_);
  auto& slot = by_sandbox_[id];
  if (!slot) slot = std::make_unique<std::atomic<std::size_t>>(0);
  return *slot;
}

bool ConnectionCounter::enter_pending_source(const std::string& source, std::size_t cap) {
  std::lock_guard lock(pending_mutex_);
  std::size_t& n = pending_by_source_[source];
  if (n >= cap) {
    if (n == 0) pending_by_source_.erase(source);
    return false;
  }
  ++n;
  return true;
}

void ConnectionCounter::leave_pending_source(const std::string& source) {
  std::lock_guard lock(pending_mutex_);
  const auto it = pending_by_source_.find(source);
  if (it != pending_by_source_.end() && --it->second == 0) pending_by_source_.erase(it);
}

PendingSlot::PendingSlot(ConnectionCounter& counter, std::string source, std::size_t total_cap,
                         std::size_t source_cap)
    : source_(std::move(source)) {
  if (counter.pending.fetch_add(1) >= total_cap) {
    counter.pending.fetch_sub(1);
    return;
  }
  if (!counter.enter_pending_source(source_, source_cap)) {
    counter.pending.fetch_sub(1);
    return;
  }
  counter_ = &counter;
}

void PendingSlot::release() {
  if (counter_ == nullptr) return;
  counter_->leave_pending_source(source_);
  counter_->pending.fetch_sub(1);
  counter_ = nullptr;
}

std::string sha256(std::string_view data) {
  // Fetched once: OpenSSL 3's one-shot SHA256() looks the algorithm up on every call, which
  // cost as much as the hashing itself (every CONNECT, and each connection's first request, is
  // authenticated). One context per thread, reset by each init: EVP_Digest allocates and frees
  // one per call.
  static EVP_MD* const md = EVP_MD_fetch(nullptr, "SHA256", nullptr);
  thread_local const std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(),
                                                                                 &EVP_MD_CTX_free);
  std::string digest(SHA256_DIGEST_LENGTH, '\0');
  auto* out = reinterpret_cast<unsigned char*>(digest.data());
  if (md == nullptr || ctx == nullptr || EVP_DigestInit_ex2(ctx.get(), md, nullptr) != 1 ||
      EVP_DigestUpdate(ctx.get(), data.data(), data.size()) != 1 ||
      EVP_DigestFinal_ex(ctx.get(), out, nullptr) != 1) {
    SHA256(reinterpret_cast<const unsigned char*>(data.data()), data.size(), out);
  }
  return digest;
}

namespace {

// A sandbox without a token is reached only through its source addresses.
void add_identity(Snapshot& snap, const config::Sandbox& sb) {
  if (!sb.token.empty()) snap.token_digests.insert_or_assign(sb.spec.id, sha256(sb.token));
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
