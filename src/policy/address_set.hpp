#pragma once

#include <cstddef>
#include <vector>

#include "policy/ip_address.hpp"

namespace sandgate::policy {

// An immutable set of addresses, looked up by binary search with no allocation. The proxy
// keeps the sandbox host's own interface addresses in one, shared as
// shared_ptr<const AddressSet> and replaced whole when an interface changes, so a decision
// reads it with no lock and no system call.
class AddressSet {
 public:
  AddressSet() = default;
  explicit AddressSet(std::vector<IpAddress> addresses);  // sorted and deduplicated here

  bool contains(const IpAddress& a) const;
  std::size_t size() const { return sorted_.size(); }
  const std::vector<IpAddress>& addresses() const { return sorted_; }
  bool operator==(const AddressSet&) const = default;

 private:
  std::vector<IpAddress> sorted_;
};

}  // namespace sandgate::policy
