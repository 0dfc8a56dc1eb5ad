#include "launcher/layout.hpp"

#include <algorithm>

namespace sandgate::launcher {

unsigned pool_capacity(const policy::Cidr& pool) {
  if (!pool.network.is_v4() || pool.prefix > 30) return 0;
  const unsigned bits = 30 - pool.prefix;
  if (bits >= 20) return kMaxSlots;
  return 1U << bits;
}

std::optional<unsigned> lowest_free_slot(const std::set<unsigned>& used, unsigned capacity) {
  unsigned candidate = 0;
  for (const unsigned slot : used) {  // ascending
    if (slot > candidate) break;
    if (slot == candidate) ++candidate;
  }
  if (candidate >= capacity) return std::nullopt;
  return candidate;
}

namespace {

// k when `name` is prefix + decimal k (no leading zeros) + suffix.
std::optional<unsigned> slot_in_name(std::string_view name, std::string_view prefix,
                                     std::string_view suffix) {
  if (!name.starts_with(prefix) || !name.ends_with(suffix)) return std::nullopt;
  if (name.size() <= prefix.size() + suffix.size()) return std::nullopt;
  const std::string_view digits =
      name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
  if (digits.size() > 7 || (digits.size() > 1 && digits.front() == '0')) return std::nullopt;
  unsigned k = 0;
  for (const char c : digits) {
    if (c < '0' || c > '9') return std::nullopt;
    k = k * 10 + static_cast<unsigned>(c - '0');
  }
  return k;
}

}  // namespace

std::set<unsigned> slots_taken_on_host(const policy::Cidr& pool, const std::set<std::string>& links,
                                       const std::set<std::string>& tables,
                                       const std::vector<policy::IpAddress>& addresses) {
  std::set<unsigned> taken;
  for (const std::string& link : links) {
    if (auto k = slot_in_name(link, "sg", "h")) taken.insert(*k);
    if (auto k = slot_in_name(link, "sg", "s")) taken.insert(*k);
  }
  for (const std::string& table : tables) {
    if (auto k = slot_in_name(table, "sandgate_", "")) taken.insert(*k);
  }
  const unsigned capacity = pool_capacity(pool);
  for (const policy::IpAddress& a : addresses) {
    if (capacity == 0 || !a.is_v4() || !pool.contains(a)) continue;
    const unsigned k = (a.v4_value() - pool.network.v4_value()) / 4;
    if (k < capacity) taken.insert(k);
  }
  return taken;
}

policy::IpAddress host_address(const policy::Cidr& pool, unsigned slot) {
  return policy::IpAddress::v4(pool.network.v4_value() + 4 * slot + 1);
}

policy::IpAddress sandbox_address(const policy::Cidr& pool, unsigned slot) {
  return policy::IpAddress::v4(pool.network.v4_value() + 4 * slot + 2);
}

std::string host_if_name(unsigned slot) {
  return "sg" + std::to_string(slot) + "h";
}
std::string sandbox_if_name(unsigned slot) {
  return "sg" + std::to_string(slot) + "s";
}
std::string table_name(unsigned slot) {
  return "sandgate_" + std::to_string(slot);
}
std::string netns_name(std::string_view id) {
  return "sg-" + std::string(id);
}

bool valid_sandbox_id(std::string_view id) {
  if (id.empty() || id.size() > 64 || id.front() == '.' || id.front() == '-') return false;
  return std::all_of(id.begin(), id.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '.' || c == '-';
  });
}

}  // namespace sandgate::launcher
