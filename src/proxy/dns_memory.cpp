#include "proxy/dns_memory.hpp"

#include <algorithm>

namespace sandgate::proxy {

DnsMemory::DnsMemory(std::size_t max_per_sandbox, std::size_t max_total)
    : max_per_sandbox_(std::max<std::size_t>(1, max_per_sandbox)),
      max_total_(std::max<std::size_t>(1, max_total)) {}

void DnsMemory::evict_one(Sandbox& sandbox) {
  sandbox.entries.erase(sandbox.order.front());
  sandbox.order.pop_front();
  --total_;
}

DnsMemory::Sandbox& DnsMemory::largest(const Sandbox& adding) {
  Sandbox* most = nullptr;
  std::size_t most_size = 0;
  for (auto& [id, sandbox] : sandboxes_) {
    const std::size_t size = sandbox.entries.size() + (&sandbox == &adding ? 1 : 0);
    if (most == nullptr || size > most_size || (size == most_size && &sandbox == &adding)) {
      most = &sandbox;
      most_size = size;
    }
  }
  return *most;
}

void DnsMemory::remember(std::string_view sandbox, const std::string& name,
                         const std::vector<policy::IpAddress>& addresses, std::chrono::seconds ttl,
                         Clock::time_point now) {
  const auto expires = now + std::max<Clock::duration>(ttl, kMinKeep);
  std::lock_guard lock(mutex_);
  auto found = sandboxes_.find(sandbox);
  if (found == sandboxes_.end()) found = sandboxes_.emplace(std::string(sandbox), Sandbox{}).first;
  Sandbox& own = found->second;
  for (const policy::IpAddress& address : addresses) {
    auto it = own.entries.find(address);
    if (it != own.entries.end()) {
      own.order.splice(own.order.end(), own.order, it->second.in_order);  // now most recent
    } else {
      if (own.entries.size() >= max_per_sandbox_) evict_one(own);
      // Full: the sandbox holding the most pays, which is this one unless it holds little.
      while (total_ >= max_total_) {
        Sandbox& victim = largest(own);
        if (victim.entries.empty()) break;  // only `own`, empty: cannot happen with max >= 1
        evict_one(victim);
      }
      own.order.push_back(address);
      it = own.entries.emplace(address, Entry{{}, std::prev(own.order.end())}).first;
      ++total_;
    }
    auto& names = it->second.names;
    std::erase_if(names, [&](const Named& n) { return n.name == name || n.expires <= now; });
    names.push_back({name, expires});
    if (names.size() > kMaxNamesPerAddress) names.erase(names.begin());
  }
  if (own.entries.empty()) sandboxes_.erase(found);
}

std::vector<std::string> DnsMemory::names_for(std::string_view sandbox,
                                              const policy::IpAddress& address,
                                              Clock::time_point now) const {
  std::vector<std::string> out;
  std::lock_guard lock(mutex_);
  const auto sb = sandboxes_.find(sandbox);
  if (sb == sandboxes_.end()) return out;
  const auto it = sb->second.entries.find(address);
  if (it == sb->second.entries.end()) return out;
  for (auto n = it->second.names.rbegin(); n != it->second.names.rend(); ++n) {
    if (n->expires > now) out.push_back(n->name);
  }
  return out;
}

std::size_t DnsMemory::size(std::string_view sandbox) const {
  std::lock_guard lock(mutex_);
  const auto sb = sandboxes_.find(sandbox);
  return sb == sandboxes_.end() ? 0 : sb->second.entries.size();
}

std::size_t DnsMemory::size() const {
  std::lock_guard lock(mutex_);
  return total_;
}

}  // namespace sandgate::proxy
