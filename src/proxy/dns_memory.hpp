#pragma once

#include <chrono>
#include <cstddef>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "policy/ip_address.hpp"

namespace sandgate::proxy {

// Which names the DNS listener answered to each sandbox with which addresses. A transparent
// connection that carries no name (no SNI, no Host: ssh, databases) is attributed through it:
// the sandbox asked for github.com, got 140.82.121.4, and now connects to 140.82.121.4:22.
// Shared by every worker; a mutex guards it (touched once per DNS answer and once per
// nameless connection, never per byte).
class DnsMemory {
 public:
  using Clock = std::chrono::steady_clock;

  // At least this long, whatever the record TTL: a client may connect a little after its
  // resolver's cache expired.
  static constexpr std::chrono::seconds kMinKeep{30};
  static constexpr std::size_t kMaxNamesPerAddress = 8;
  static constexpr std::size_t kMaxEntries = 100'000;

  void remember(std::string_view sandbox, const std::string& name,
                const std::vector<policy::IpAddress>& addresses, std::chrono::seconds ttl,
                Clock::time_point now = Clock::now());

  // Names answered to this sandbox with this address and not yet expired, newest first.
  std::vector<std::string> names_for(std::string_view sandbox, const policy::IpAddress& address,
                                     Clock::time_point now = Clock::now()) const;

  // Drops everything about sandboxes for which `keep` returns false (after a reload).
  template <typename Keep>
  void retain(Keep keep) {
    std::lock_guard lock(mutex_);
    std::erase_if(entries_, [&](const auto& e) { return !keep(e.first.first); });
  }

 private:
  struct Named {
    std::string name;
    Clock::time_point expires;
  };
  using Key = std::pair<std::string, policy::IpAddress>;

  mutable std::mutex mutex_;
  std::map<Key, std::vector<Named>, std::less<>> entries_;
};

}  // namespace sandgate::proxy
