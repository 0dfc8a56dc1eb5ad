#pragma once

#include <chrono>
#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "dns/message.hpp"
#include "policy/ip_address.hpp"

namespace sandgate::dns {

// TTL-bounded name → addresses map, positive and negative answers. Pure: no I/O, the caller
// passes the time. An entry is dropped when found expired, and when room is needed (expired
// ones first, then the one closest to expiry). Not thread-safe; owned by one Resolver.
class AnswerCache {
 public:
  using Clock = std::chrono::steady_clock;

  struct Hit {
    std::vector<policy::IpAddress> addresses;  // empty for a negative entry
    std::chrono::seconds ttl_left{0};
    bool negative = false;
    bool nxdomain = false;   // negative: the name does not exist (else: NODATA)
    std::optional<Soa> soa;  // as stored; its ttl not yet counted down
  };

  explicit AnswerCache(std::size_t max_entries) : max_entries_(max_entries) {}

  std::optional<Hit> find(const std::string& name, Clock::time_point now);
  // A ttl of zero or less stores nothing (and forgets any older entry for the name).
  // `soa`: of the family that had no records, if one had none.
  void put(const std::string& name, std::vector<policy::IpAddress> addresses,
           std::chrono::seconds ttl, Clock::time_point now, std::optional<Soa> soa = {});
  void put_negative(const std::string& name, std::chrono::seconds ttl, Clock::time_point now,
                    bool nxdomain = false, std::optional<Soa> soa = {});

  std::size_t size() const { return entries_.size(); }

 private:
  using ExpiryIndex = std::multimap<Clock::time_point, const std::string*>;
  struct Entry {
    std::vector<policy::IpAddress> addresses;
    bool negative = false;
    bool nxdomain = false;
    std::optional<Soa> soa;
    Clock::time_point expires;
    ExpiryIndex::iterator by_expiry;  // points back at this entry's key
  };

  void store(const std::string& name, Entry entry, std::chrono::seconds ttl, Clock::time_point now);
  void erase(std::unordered_map<std::string, Entry>::iterator it);
  void make_room(Clock::time_point now);

  std::size_t max_entries_;
  std::unordered_map<std::string, Entry> entries_;  // node-based: key addresses are stable
  ExpiryIndex by_expiry_;
};

}  // namespace sandgate::dns
