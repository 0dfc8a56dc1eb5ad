#pragma once

// Internal to src/policy: host rules indexed by name, shared by the host rules (policy.cpp)
// and the request rules (request_rules.cpp).

#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "policy/host_pattern.hpp"

namespace sandgate::policy::detail {

struct StringHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const noexcept {
    return std::hash<std::string_view>{}(s);
  }
};
template <class V>
using StringMap = std::unordered_map<std::string, V, StringHash, std::equal_to<>>;

// Entries keyed by host pattern, so that a lookup costs one probe for the exact name and one
// per parent suffix, whatever the number of patterns. `V` is what a pattern stands for.
template <class V>
class NameIndex {
 public:
  void add(const HostPattern& pattern, V value) {
    auto& table = pattern.wildcard ? wildcard_ : exact_;
    table[pattern.domain].push_back(std::move(value));
  }

  // Calls fn(value) for the entries whose pattern matches `name`, the exact name first, then
  // each parent suffix from the longest; stops at and returns the first for which fn is true.
  template <class Fn>
  const V* find(std::string_view name, Fn&& fn) const {
    const NameIndex* self = this;
    return find_in(std::span<const NameIndex* const>(&self, 1), name, std::forward<Fn>(fn));
  }

  // The same over several indexes read as one whose entries were added index by index: for
  // each key probed, the entries of the first index, then of the next. Null indexes are
  // skipped.
  template <class Fn>
  static const V* find_in(std::span<const NameIndex* const> indexes, std::string_view name,
                          Fn&& fn) {
    auto scan = [&](bool wildcard, std::string_view key) -> const V* {
      for (const NameIndex* index : indexes) {
        if (index == nullptr) continue;
        const StringMap<std::vector<V>>& table = wildcard ? index->wildcard_ : index->exact_;
        if (table.empty()) continue;  // no hash computed for a layer without such rules
        const auto it = table.find(key);
        if (it == table.end()) continue;
        for (const V& value : it->second) {
          if (fn(value)) return &value;
        }
      }
      return nullptr;
    };
    if (const V* hit = scan(false, name)) return hit;
    for (auto dot = name.find('.'); dot != std::string_view::npos; dot = name.find('.')) {
      name.remove_prefix(dot + 1);
      if (const V* hit = scan(true, name)) return hit;
    }
    return nullptr;
  }

  bool empty() const { return exact_.empty() && wildcard_.empty(); }

 private:
  StringMap<std::vector<V>> exact_;
  StringMap<std::vector<V>> wildcard_;  // key: the domain after "*."
};

}  // namespace sandgate::policy::detail
