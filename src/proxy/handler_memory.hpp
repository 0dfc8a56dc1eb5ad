#pragma once

#include <boost/asio/bind_allocator.hpp>
#include <cstddef>
#include <memory>
#include <new>
#include <utility>

namespace sandgate::proxy {

// The heap, as an allocator of a type of its own: Asio sends handlers whose allocator is
// std::allocator through its per-thread recycling cache, which hands out any cached block
// large enough.
template <class T>
struct HeapAllocator {
  using value_type = T;
  HeapAllocator() = default;
  template <class U>
  HeapAllocator(const HeapAllocator<U>&) noexcept {}  // NOLINT: rebinding is implicit
  T* allocate(std::size_t n) {
    return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t(alignof(T))));
  }
  void deallocate(T* p, std::size_t) noexcept {
    ::operator delete(p, std::align_val_t(alignof(T)));
  }
  template <class U>
  bool operator==(const HeapAllocator<U>&) const noexcept {
    return true;
  }
};

// For a wait an idle connection may hold for hours (the relay's reads, the watchdog's timer):
// the operation gets memory of its own size, not a cached block freed by a larger operation
// (a coroutine's accept, say: 336 bytes for a wait of about 120), held as long as the wait.
template <class Handler>
auto exact_memory(Handler h) {
  return boost::asio::bind_allocator(HeapAllocator<void>(), std::move(h));
}

}  // namespace sandgate::proxy
