#include "proxy/dns_memory.hpp"

#include <algorithm>

namespace sandgate::proxy {

void DnsMemory::remember(std::string_view sandbox, const std::string& name,
                         const std::vector<policy::IpAddress>& addresses, std::chrono::seconds ttl,
                         Clock::time_point now) {
  const auto expires = now + std::max<Clock::duration>(ttl, kMinKeep);
  std::lock_guard lock(mutex_);
  if (entries_.size() + addresses.size() > kMaxEntries) {
    for (auto it = entries_.begin(); it != entries_.end();) {
      std::erase_if(it->second, [&](const Named& n) { return n.expires <= now; });
      it = it->second.empty() ? entries_.erase(it) : std::next(it);
    }
    // Still full of live answers (a sandbox resolving names in a loop): start over rather
    // than grow without bound. Attribution then falls back to denial, never to an allow.
    if (entries_.size() + addresses.size() > kMaxEntries) entries_.clear();
  }
  for (const policy::IpAddress& address : addresses) {
    auto& names = entries_[Key{std::string(sandbox), address}];
    std::erase_if(names, [&](const Named& n) { return n.name == name || n.expires <= now; });
    names.push_back({name, expires});
    if (names.size() > kMaxNamesPerAddress) names.erase(names.begin());
  }
}

std::vector<std::string> DnsMemory::names_for(std::string_view sandbox,
                                              const policy::IpAddress& address,
                                              Clock::time_point now) const {
  std::vector<std::string> out;
  std::lock_guard lock(mutex_);
  const auto it = entries_.find(Key{std::string(sandbox), address});
  if (it == entries_.end()) return out;
  for (auto n = it->second.rbegin(); n != it->second.rend(); ++n) {
    if (n->expires > now) out.push_back(n->name);
  }
  return out;
}

}  // namespace sandgate::proxy
