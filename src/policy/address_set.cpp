#include "policy/address_set.hpp"

#include <algorithm>

namespace sandgate::policy {

AddressSet::AddressSet(std::vector<IpAddress> addresses) : sorted_(std::move(addresses)) {
  std::sort(sorted_.begin(), sorted_.end());
  sorted_.erase(std::unique(sorted_.begin(), sorted_.end()), sorted_.end());
}

bool AddressSet::contains(const IpAddress& a) const {
  return std::binary_search(sorted_.begin(), sorted_.end(), a);
}

}  // namespace sandgate::policy
