#include "secrets/secret_bytes.hpp"

#include <openssl/crypto.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <new>
#include <utility>

namespace sandgate::secrets {

namespace {

std::size_t page_size() {
  static const std::size_t size = [] {
    const long n = ::sysconf(_SC_PAGESIZE);
    return n > 0 ? static_cast<std::size_t>(n) : std::size_t{4096};
  }();
  return size;
}

}  // namespace

SecretBytes::SecretBytes(std::string_view value) {
  if (value.empty()) return;
  const std::size_t page = page_size();
  mapped_ = (value.size() + page - 1) / page * page;
  void* p = ::mmap(nullptr, mapped_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  data_ = static_cast<char*>(p);
#ifdef MADV_DONTDUMP
  dontdump_ = ::madvise(p, mapped_, MADV_DONTDUMP) == 0;
#endif
  (void)::mlock(p, mapped_);  // best effort: RLIMIT_MEMLOCK may refuse
  std::memcpy(data_, value.data(), value.size());
  size_ = value.size();
}

SecretBytes::~SecretBytes() {
  release();
}

SecretBytes::SecretBytes(SecretBytes&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      mapped_(std::exchange(other.mapped_, 0)),
      dontdump_(std::exchange(other.dontdump_, false)) {}

SecretBytes& SecretBytes::operator=(SecretBytes&& other) noexcept {
  if (this != &other) {
    release();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    mapped_ = std::exchange(other.mapped_, 0);
    dontdump_ = std::exchange(other.dontdump_, false);
  }
  return *this;
}

void SecretBytes::release() noexcept {
  if (data_ == nullptr) return;
  OPENSSL_cleanse(data_, mapped_);
  ::munlock(data_, mapped_);
  ::munmap(data_, mapped_);
  data_ = nullptr;
  size_ = 0;
  mapped_ = 0;
}

void cleanse(std::string& s) {
  if (!s.empty()) OPENSSL_cleanse(s.data(), s.size());
  s.clear();
}

}  // namespace sandgate::secrets
