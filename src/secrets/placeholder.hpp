#pragma once

// Placeholders: what a sandbox gets in GH_TOKEN (and the other `env` variables a credential
// names) so that tools which refuse to run without a token run, while the token itself stays
// outside. A placeholder is "sgph_" + 40 lowercase hex digits, the first 160 bits of
// HMAC-SHA256(key, "sandgate-placeholder-v1" NUL sandbox NUL credential): recognisable,
// shaped like a token, different per sandbox and credential, and worthless outside sandgate
// (no service accepts it, and it reveals nothing about the token or the key).
//
// The key is 32 random bytes in a file (load_or_create), so a daemon restart keeps the
// placeholders of running sandboxes valid and sandgate-launch can compute them too.

#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/sharded_map.hpp"
#include "secrets/secret_bytes.hpp"

namespace sandgate::secrets {

inline constexpr std::string_view kPlaceholderPrefix = "sgph_";
inline constexpr std::size_t kPlaceholderDigits = 40;
inline constexpr std::size_t kPlaceholderLength = kPlaceholderPrefix.size() + kPlaceholderDigits;

// The HMAC key. Cheap to copy (shared, immutable).
class PlaceholderKey {
 public:
  static constexpr std::size_t kSize = 32;

  // 32 bytes from the OS's random generator.
  static PlaceholderKey generate();
  // Exactly kSize bytes (tests); throws std::invalid_argument otherwise.
  static PlaceholderKey from_bytes(std::string_view bytes);
  // Reads the key from `path`: a regular file of this user (any user's when read by root),
  // mode 0600 or stricter, holding
  // exactly kSize bytes. When the file does not exist it is created that way (O_EXCL, so two
  // processes racing to create it agree on one key). Throws std::runtime_error naming the
  // file otherwise.
  static PlaceholderKey load_or_create(const std::string& path);
  // What would make load_or_create fail for a daemon running as `owner`, without creating
  // anything: an existing key it could not use, or a missing key whose directory is missing.
  // Empty when it would succeed (as far as can be told before start).
  static std::string problem(const std::string& path, uid_t owner);

  std::string placeholder_for(std::string_view sandbox, std::string_view credential) const;

  // Same bytes (compared in constant time).
  bool operator==(const PlaceholderKey& other) const;

 private:
  explicit PlaceholderKey(std::shared_ptr<const SecretBytes> bytes) : bytes_(std::move(bytes)) {}
  std::shared_ptr<const SecretBytes> bytes_;
};

// Where a placeholder was found in a text, and whose it is.
struct PlaceholderHit {
  std::size_t offset = 0;  // of the "sgph_" prefix
  std::string_view text;   // the placeholder (kPlaceholderLength bytes of the input)
  // The sandbox and credential it was made for; null when no known pair has it (a stale or
  // forged placeholder: still nothing any service accepts, and worth logging).
  const std::string* sandbox = nullptr;
  const std::string* credential = nullptr;
  bool known() const { return sandbox != nullptr; }
};

// Every placeholder of one config snapshot: (sandbox, credential) pairs, indexed by their
// placeholder. Immutable once published; lookups take no lock. A copy shares its entries with
// the index it was copied from, so a reload that adds or removes one sandbox computes and
// copies only that sandbox's placeholders.
class PlaceholderIndex {
 public:
  PlaceholderIndex(PlaceholderKey key,
                   const std::vector<std::pair<std::string, std::string>>& pairs);

  // The key the placeholders are computed with.
  const PlaceholderKey& key() const { return key_; }
  void add(const std::string& sandbox, const std::string& credential);
  void remove(std::string_view sandbox, std::string_view credential);

  // The first placeholder-shaped substring of `text` ("sgph_" + 40 lowercase hex digits not
  // followed by another such digit), known or not; nullopt when there is none.
  std::optional<PlaceholderHit> find(std::string_view text) const;
  // All of them, left to right.
  std::vector<PlaceholderHit> find_all(std::string_view text) const;

  std::size_t size() const { return owners_.size(); }

 private:
  struct Owner {
    std::string sandbox;
    std::string credential;
  };
  PlaceholderKey key_;
  common::ShardedStringMap<Owner> owners_;  // placeholder -> owner
};

// Whether `text` contains "sgph_" at all: the proxy's cheap first test per header value.
inline bool may_contain_placeholder(std::string_view text) {
  return text.find(kPlaceholderPrefix) != std::string_view::npos;
}

}  // namespace sandgate::secrets
