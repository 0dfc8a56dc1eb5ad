#include "dns/answer_cache.hpp"

#include <utility>

namespace sandgate::dns {

std::optional<AnswerCache::Hit> AnswerCache::find(const std::string& name, Clock::time_point now) {
  const auto it = entries_.find(name);
  if (it == entries_.end()) return std::nullopt;
  if (it->second.expires <= now) {
    erase(it);
    return std::nullopt;
  }
  const Entry& e = it->second;
  return Hit{e.addresses, std::chrono::duration_cast<std::chrono::seconds>(e.expires - now),
             e.negative, e.nxdomain, e.soa};
}

void AnswerCache::put(const std::string& name, std::vector<policy::IpAddress> addresses,
                      std::chrono::seconds ttl, Clock::time_point now, std::optional<Soa> soa) {
  store(name, Entry{std::move(addresses), false, false, std::move(soa), {}, {}}, ttl, now);
}

void AnswerCache::put_negative(const std::string& name, std::chrono::seconds ttl,
                               Clock::time_point now, bool nxdomain, std::optional<Soa> soa) {
  store(name, Entry{{}, true, nxdomain, std::move(soa), {}, {}}, ttl, now);
}

void AnswerCache::store(const std::string& name, Entry entry, std::chrono::seconds ttl,
                        Clock::time_point now) {
  if (const auto old = entries_.find(name); old != entries_.end()) erase(old);
  if (ttl <= std::chrono::seconds::zero() || max_entries_ == 0) return;
  make_room(now);
  entry.expires = now + ttl;
  const auto [it, inserted] = entries_.emplace(name, std::move(entry));
  it->second.by_expiry = by_expiry_.emplace(it->second.expires, &it->first);
}

void AnswerCache::erase(std::unordered_map<std::string, Entry>::iterator it) {
  by_expiry_.erase(it->second.by_expiry);
  entries_.erase(it);
}

void AnswerCache::make_room(Clock::time_point now) {
  while (!by_expiry_.empty() && by_expiry_.begin()->first <= now) {
    erase(entries_.find(*by_expiry_.begin()->second));
  }
  while (entries_.size() >= max_entries_ && !by_expiry_.empty()) {
    erase(entries_.find(*by_expiry_.begin()->second));
  }
}

}  // namespace sandgate::dns
