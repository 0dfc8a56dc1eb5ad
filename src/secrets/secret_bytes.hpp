#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace sandgate::secrets {

// A secret (a token, a client secret, a key) in memory of its own: page-aligned, marked
// MADV_DONTDUMP so that a core dump leaves it out, locked with mlock when the limit allows
// (best effort: never swapped out), and wiped with OPENSSL_cleanse when freed. Move-only;
// the bytes are never copied into an ordinary std::string by this class (callers that need
// one, to build a header, own that copy briefly).
class SecretBytes {
 public:
  SecretBytes() = default;
  explicit SecretBytes(std::string_view value);
  ~SecretBytes();
  SecretBytes(SecretBytes&& other) noexcept;
  SecretBytes& operator=(SecretBytes&& other) noexcept;
  SecretBytes(const SecretBytes&) = delete;
  SecretBytes& operator=(const SecretBytes&) = delete;

  std::string_view view() const { return {data_, size_}; }
  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  // Whether the memory was marked MADV_DONTDUMP (false where the OS refused; tests look).
  bool excluded_from_dumps() const { return dontdump_; }

 private:
  void release() noexcept;

  char* data_ = nullptr;
  std::size_t size_ = 0;
  std::size_t mapped_ = 0;  // bytes mapped (a multiple of the page size)
  bool dontdump_ = false;
};

// Overwrites a string's bytes in a way the compiler cannot drop (OPENSSL_cleanse), for the
// short-lived std::string copies of a secret (file contents, a built header, a response body).
void cleanse(std::string& s);

}  // namespace sandgate::secrets
