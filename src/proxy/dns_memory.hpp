#pragma once

#include <chrono>
#include <cstddef>
#include <list>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "policy/ip_address.hpp"

namespace sandgate::proxy {

// Which names the DNS listener answered to each sandbox with which addresses. A transparent
// connection that carries no name (no SNI, no Host: ssh, databases) is attributed through it:
// the sandbox asked for github.com, got 140.82.121.4, and now connects to 140.82.121.4:22.
//
// Bounded per sandbox and in total, so that one sandbox resolving names without end never
// erases another's answers: a sandbox over its own cap loses its own least recently
// remembered address; when the whole table is full, the sandbox holding the most addresses
// (the one asking for room, on a tie) loses its least recently remembered one. Forgetting only ever
// turns an attribution into a denial, never into an allow. Shared by every worker; a mutex guards
// it (touched once per DNS answer and once per nameless connection, never per byte).
class DnsMemory {
 public:
  using Clock = std::chrono::steady_clock;

  // At least this long, whatever the record TTL: a client may connect a little after its
  // resolver's cache expired.
  static constexpr std::chrono::seconds kMinKeep{30};
  static constexpr std::size_t kMaxNamesPerAddress = 8;
  // Addresses remembered for one sandbox, and for all together.
  static constexpr std::size_t kMaxAddressesPerSandbox = 10'000;
  static constexpr std::size_t kMaxAddresses = 100'000;

  explicit DnsMemory(std::size_t max_per_sandbox = kMaxAddressesPerSandbox,
                     std::size_t max_total = kMaxAddresses);

  void remember(std::string_view sandbox, const std::string& name,
                const std::vector<policy::IpAddress>& addresses, std::chrono::seconds ttl,
                Clock::time_point now = Clock::now());

  // Names answered to this sandbox with this address and not yet expired, newest first.
  std::vector<std::string> names_for(std::string_view sandbox, const policy::IpAddress& address,
                                     Clock::time_point now = Clock::now()) const;

  // Addresses remembered (expired ones not yet dropped included), for one sandbox or all.
  std::size_t size(std::string_view sandbox) const;
  std::size_t size() const;

  // Drops everything about sandboxes for which `keep` returns false (after a reload).
  template <typename Keep>
  void retain(Keep keep) {
    std::lock_guard lock(mutex_);
    for (auto it = sandboxes_.begin(); it != sandboxes_.end();) {
      if (keep(it->first)) {
        ++it;
      } else {
        total_ -= it->second.entries.size();
        it = sandboxes_.erase(it);
      }
    }
  }

 private:
  struct Named {
    std::string name;
    Clock::time_point expires;
  };
  struct Entry {
    std::vector<Named> names;
    std::list<policy::IpAddress>::iterator in_order;  // its place in Sandbox::order
  };
  // One sandbox's addresses, and their order of last remembering (front: least recent).
  struct Sandbox {
    std::map<policy::IpAddress, Entry> entries;
    std::list<policy::IpAddress> order;
  };

  // Forgets the least recently remembered address of `sandbox`.
  void evict_one(Sandbox& sandbox);
  // The sandbox holding the most addresses, counting the one about to be added to `adding`
  // (so a tie goes against the sandbox that asks for more room).
  Sandbox& largest(const Sandbox& adding);

  const std::size_t max_per_sandbox_;
  const std::size_t max_total_;
  mutable std::mutex mutex_;
  std::map<std::string, Sandbox, std::less<>> sandboxes_;
  std::size_t total_ = 0;
};

}  // namespace sandgate::proxy
