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
