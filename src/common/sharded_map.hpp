#pragma once

// A hash map by string whose copies share their contents: entries are spread by hash over
// kShards shards, each an unordered_map held by shared_ptr, so that copying the map copies
// kShards pointers and changing one entry copies only its shard. For tables read on every
// decision (policy::Policy's sandboxes), where a lookup must cost one hash probe whatever the
// size, and a reload that changes one of 10,000 entries must not copy the rest.
//
// A copy is a value: a shard two maps hold is never written (it is copied first), so copies
// may be read from any thread while another thread changes its own copy.

#include <array>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>

namespace sandgate::common {

template <class V>
class ShardedStringMap {
 public:
  static constexpr std::size_t kShards = 256;

  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

  // The value of `key`; null when there is none.
  const V* find(std::string_view key) const {
    const std::size_t hash = Hash{}(key);
    const Shard* shard = shards_[shard_of(hash)].get();
    if (shard == nullptr) return nullptr;
    const auto it = shard->find(key);
    return it == shard->end() ? nullptr : &it->second;
  }
  bool contains(std::string_view key) const { return find(key) != nullptr; }

  void insert_or_assign(std::string key, V value) {
    Shard& shard = writable(shard_of(Hash{}(key)));
    if (shard.insert_or_assign(std::move(key), std::move(value)).second) ++size_;
  }

  // False when there was no such key.
  bool erase(std::string_view key) {
    const std::size_t index = shard_of(Hash{}(key));
    if (shards_[index] == nullptr) return false;
    const auto it = shards_[index]->find(key);
    if (it == shards_[index]->end()) return false;
    Shard& shard = writable(index);
    shard.erase(shard.find(key));
    --size_;
    if (shard.empty()) shards_[index] = nullptr;
    return true;
  }

  // Calls f(key, value) for every entry, in no particular order.
  template <class F>
  void for_each(F&& f) const {
    for (const auto& shard : shards_) {
      if (shard == nullptr) continue;
      for (const auto& [key, value] : *shard) f(key, value);
    }
  }

  // Whether both maps hold the same shard for `key` (tests: what a change copied).
  bool shares_shard(const ShardedStringMap& other, std::string_view key) const {
    const std::size_t index = shard_of(Hash{}(key));
    return shards_[index] == other.shards_[index];
  }

 private:
  struct Hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const noexcept {
      return std::hash<std::string_view>{}(s);
    }
  };
  using Shard = std::unordered_map<std::string, V, Hash, std::equal_to<>>;

  // The top bits: the shard's own table buckets by the low ones.
  static std::size_t shard_of(std::size_t hash) { return hash >> (sizeof(std::size_t) * 8 - 8); }

  // Shard `index`, made if absent, copied first unless this map alone holds it.
  Shard& writable(std::size_t index) {
    auto& shard = shards_[index];
    if (shard == nullptr) {
      shard = std::make_shared<Shard>();
    } else if (shard.use_count() != 1) {
      shard = std::make_shared<Shard>(*shard);
    }
    return *shard;
  }

  static_assert(kShards == 256, "shard_of takes the top 8 bits");
  std::array<std::shared_ptr<Shard>, kShards> shards_;
  std::size_t size_ = 0;
};

}  // namespace sandgate::common
