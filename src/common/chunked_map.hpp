#pragma once

// A sorted map whose copies share their contents: entries live in immutable chunks of at
// most kMaxChunk, held by shared_ptr, so that copying the map copies one pointer per chunk and
// changing one entry copies only its chunk. What a reload changes (one sandbox of 10,000)
// then costs the change, not the size (config::Config::sandboxes, proxy::Snapshot's maps).
//
// A copy is a value: changing it never changes the map it was copied from, and a chunk two
// maps hold is never written, so copies may be read from any thread while another thread
// changes its own copy (as long as no thread changes a map others read). Lookups cost a binary
// search over the chunks, then one within a chunk.

#include <algorithm>
#include <cstddef>
#include <functional>
#include <iterator>
#include <memory>
#include <utility>
#include <vector>

namespace sandgate::common {

template <class K, class V, class Less = std::less<>>
class ChunkedMap {
 public:
  using value_type = std::pair<K, V>;
  // Chunks hold between kMaxChunk / 4 and kMaxChunk entries (a lone chunk fewer): a change
  // copies at most kMaxChunk, a copy of the map one pointer per kMaxChunk / 4 entries at worst.
  static constexpr std::size_t kMaxChunk = 64;

 private:
  using Chunk = std::vector<value_type>;
  // Shared with copies of the map: a chunk is written only while this map alone holds it
  // (use_count 1), otherwise copied first.
  using Chunks = std::vector<std::shared_ptr<Chunk>>;

 public:
  class const_iterator {
   public:
    using iterator_category = std::forward_iterator_tag;
    using value_type = ChunkedMap::value_type;
    using difference_type = std::ptrdiff_t;
    using pointer = const value_type*;
    using reference = const value_type&;

    const_iterator() = default;
    reference operator*() const { return (*(*chunks_)[chunk_])[entry_]; }
    pointer operator->() const { return &**this; }
    const_iterator& operator++() {
      if (++entry_ == (*chunks_)[chunk_]->size()) {
        ++chunk_;
        entry_ = 0;
      }
      return *this;
    }
    const_iterator operator++(int) {
      const_iterator old = *this;
      ++*this;
      return old;
    }
    bool operator==(const const_iterator& other) const {
      return chunk_ == other.chunk_ && entry_ == other.entry_;
    }

   private:
    friend class ChunkedMap;
    const_iterator(const Chunks* chunks, std::size_t chunk, std::size_t entry)
        : chunks_(chunks), chunk_(chunk), entry_(entry) {}
    const Chunks* chunks_ = nullptr;
    std::size_t chunk_ = 0;
    std::size_t entry_ = 0;
  };

  ChunkedMap() = default;

  // From entries sorted by key, keys unique.
  static ChunkedMap from_sorted(std::vector<value_type> entries) {
    ChunkedMap map;
    map.size_ = entries.size();
    constexpr std::size_t kFill = kMaxChunk / 2;  // room to grow either way
    for (std::size_t at = 0; at < entries.size(); at += kFill) {
      const auto first = entries.begin() + static_cast<std::ptrdiff_t>(at);
      const auto last =
          entries.begin() + static_cast<std::ptrdiff_t>(std::min(entries.size(), at + kFill));
      map.chunks_.push_back(
          std::make_shared<Chunk>(std::make_move_iterator(first), std::make_move_iterator(last)));
    }
    return map;
  }

  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  const_iterator begin() const { return {&chunks_, 0, 0}; }
  const_iterator end() const { return {&chunks_, chunks_.size(), 0}; }

  // The value of `key`; null when there is none.
  template <class Key>
  const V* find(const Key& key) const {
    if (chunks_.empty()) return nullptr;
    const Chunk& chunk = *chunks_[chunk_for(key)];
    const auto it = lower_bound(chunk, key);
    return it != chunk.end() && !Less{}(key, it->first) ? &it->second : nullptr;
  }
  template <class Key>
  bool contains(const Key& key) const {
    return find(key) != nullptr;
  }

  void insert_or_assign(K key, V value) {
    if (chunks_.empty()) chunks_.push_back(std::make_shared<Chunk>());
    const std::size_t index = chunk_for(key);
    Chunk& chunk = writable(index);
    const auto it = lower_bound(chunk, key);
    if (it != chunk.end() && !Less{}(key, it->first)) {
      it->second = std::move(value);
      return;
    }
    chunk.emplace(it, std::move(key), std::move(value));
    ++size_;
    if (chunk.size() <= kMaxChunk) return;
    const auto half = chunk.begin() + static_cast<std::ptrdiff_t>(chunk.size() / 2);
    auto upper = std::make_shared<Chunk>(std::make_move_iterator(half),
                                         std::make_move_iterator(chunk.end()));
    chunk.erase(half, chunk.end());
    chunks_.insert(chunks_.begin() + static_cast<std::ptrdiff_t>(index) + 1, std::move(upper));
  }

  // False when there was no such key.
  template <class Key>
  bool erase(const Key& key) {
    if (chunks_.empty()) return false;
    const std::size_t index = chunk_for(key);
    const auto found = lower_bound(*chunks_[index], key);
    if (found == chunks_[index]->end() || Less{}(key, found->first)) return false;
    const auto offset = found - chunks_[index]->begin();
    Chunk& chunk = writable(index);
    chunk.erase(chunk.begin() + offset);
    --size_;
    if (chunk.empty()) {
      chunks_.erase(chunks_.begin() + static_cast<std::ptrdiff_t>(index));
      return true;
    }
    // A small chunk joins a neighbour when both fit in one, so chunks stay few.
    if (chunk.size() < kMaxChunk / 4 && chunks_.size() > 1) {
      const std::size_t left = index > 0 ? index - 1 : index;
      if (chunks_[left]->size() + chunks_[left + 1]->size() <= kMaxChunk) {
        Chunk& joined = writable(left);
        const Chunk& next = *chunks_[left + 1];
        joined.insert(joined.end(), next.begin(), next.end());
        chunks_.erase(chunks_.begin() + static_cast<std::ptrdiff_t>(left) + 1);
      }
    }
    return true;
  }

  // How many chunks it holds (tests).
  std::size_t chunk_count() const { return chunks_.size(); }
  // Whether both maps hold the same chunk at `index` (tests: what a change copied).
  bool shares_chunk(const ChunkedMap& other, std::size_t index) const {
    return index < chunks_.size() && index < other.chunks_.size() &&
           chunks_[index] == other.chunks_[index];
  }

 private:
  template <class Key>
  static typename Chunk::const_iterator lower_bound(const Chunk& chunk, const Key& key) {
    return std::lower_bound(
        chunk.begin(), chunk.end(), key,
        [](const value_type& entry, const Key& k) { return Less{}(entry.first, k); });
  }
  template <class Key>
  static typename Chunk::iterator lower_bound(Chunk& chunk, const Key& key) {
    return std::lower_bound(
        chunk.begin(), chunk.end(), key,
        [](const value_type& entry, const Key& k) { return Less{}(entry.first, k); });
  }

  // The chunk that holds `key`, or would: the last whose first key is not above it (the
  // first chunk for a key below every other). Chunks are never empty, except the one an
  // empty map's insert makes.
  template <class Key>
  std::size_t chunk_for(const Key& key) const {
    const auto it = std::upper_bound(
        chunks_.begin() + 1, chunks_.end(), key,
        [](const Key& k, const std::shared_ptr<Chunk>& c) { return Less{}(k, c->front().first); });
    return static_cast<std::size_t>(it - chunks_.begin()) - 1;
  }

  // Chunk `index`, copied first unless this map alone holds it.
  Chunk& writable(std::size_t index) {
    if (chunks_[index].use_count() != 1) chunks_[index] = std::make_shared<Chunk>(*chunks_[index]);
    return *chunks_[index];
  }

  Chunks chunks_;
  std::size_t size_ = 0;
};

}  // namespace sandgate::common
