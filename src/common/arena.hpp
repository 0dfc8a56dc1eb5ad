#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <new>

namespace sandgate::common {

// A bump arena over a fixed block of N bytes it holds inline, for the short-lived allocations
// of one message: Beast's header fields (one node per field) cost no malloc while they fit.
// An allocation that does not fit goes to the heap (operator new) and is freed there, so a
// message with more or bigger fields costs what it did without the arena and never more
// than N bytes besides. Inside the block, memory is given back only when it is the last
// allocation (a field replaced right after it was added); the rest is reused after reset().
//
// Not thread-safe: one arena serves one message on one executor. It must outlive every
// allocator and container that uses it, and it is neither copied nor moved (allocators point
// at it). Keep it where the message lives while it is handled (a coroutine frame), not in
// what an idle connection holds.
template <std::size_t N>
class InlineArena {
 public:
  InlineArena() = default;
  InlineArena(const InlineArena&) = delete;
  InlineArena& operator=(const InlineArena&) = delete;

  void* allocate(std::size_t bytes, std::size_t align) {
    const std::size_t start = (used_ + align - 1) & ~(align - 1);
    if (align <= alignof(std::max_align_t) && start <= N && bytes <= N - start) {
      used_ = start + bytes;
      last_ = start;
      return block_ + start;
    }
    if (align <= __STDCPP_DEFAULT_NEW_ALIGNMENT__) return ::operator new(bytes);
    return ::operator new(bytes, std::align_val_t(align));
  }

  void deallocate(void* p, std::size_t bytes, std::size_t align) noexcept {
    auto* b = static_cast<std::byte*>(p);
    if (owns(b)) {
      if (static_cast<std::size_t>(b - block_) == last_ && last_ + bytes == used_) used_ = last_;
      return;
    }
    // Unsized delete: clang 14 (the fuzz and tsan builds) has no sized deallocation unless
    // -fsized-deallocation is given, and glibc's free does not use the size anyway.
    if (align <= __STDCPP_DEFAULT_NEW_ALIGNMENT__) {
      ::operator delete(p);
    } else {
      ::operator delete(p, std::align_val_t(align));
    }
  }

  // Makes the whole block free again. Only when nothing allocated from it is still in use.
  void reset() noexcept { used_ = last_ = 0; }

  bool owns(const void* p) const noexcept {
    const auto* b = static_cast<const std::byte*>(p);
    return std::less_equal<const std::byte*>()(block_, b) &&
           std::less<const std::byte*>()(b, block_ + N);
  }
  std::size_t used() const noexcept { return used_; }
  static constexpr std::size_t capacity() { return N; }

 private:
  alignas(std::max_align_t) std::byte block_[N];
  std::size_t used_ = 0;
  std::size_t last_ = 0;  // offset of the last allocation made from the block
};

// The standard allocator interface over an InlineArena (Beast's basic_fields<Allocator>,
// std containers). Copies share the arena; two allocators are equal when they share one.
template <class T, std::size_t N>
class ArenaAllocator {
 public:
  using value_type = T;
  template <class U>
  struct rebind {
    using other = ArenaAllocator<U, N>;
  };

  explicit ArenaAllocator(InlineArena<N>& arena) noexcept : arena_(&arena) {}
  template <class U>
  ArenaAllocator(const ArenaAllocator<U, N>& other) noexcept : arena_(other.arena()) {}

  T* allocate(std::size_t n) {
    if (n > static_cast<std::size_t>(-1) / sizeof(T)) throw std::bad_array_new_length();
    return static_cast<T*>(arena_->allocate(n * sizeof(T), alignof(T)));
  }
  void deallocate(T* p, std::size_t n) noexcept {
    arena_->deallocate(p, n * sizeof(T), alignof(T));
  }

  InlineArena<N>* arena() const noexcept { return arena_; }

  template <class U>
  bool operator==(const ArenaAllocator<U, N>& other) const noexcept {
    return arena_ == other.arena();
  }

 private:
  InlineArena<N>* arena_;
};

}  // namespace sandgate::common
