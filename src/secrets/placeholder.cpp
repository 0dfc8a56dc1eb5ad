#include "secrets/placeholder.hpp"

#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/rand.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>

#include "secrets/encoding.hpp"

namespace sandgate::secrets {

namespace {

constexpr std::string_view kContext = "sandgate-placeholder-v1";

bool is_hex_digit(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

std::runtime_error file_error(const std::string& path, const std::string& what) {
  return std::runtime_error(path + ": placeholder key: " + what);
}

// Reads exactly kSize bytes from an open key file, checking what it is first.
std::string read_key(int fd, const std::string& path, uid_t owner) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw file_error(path, std::strerror(errno));
  if (!S_ISREG(st.st_mode)) throw file_error(path, "not a regular file");
  if ((st.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
    throw file_error(path, "accessible by group or others; run chmod 600 " + path);
  }
  // The daemon's user owns it; root (sandgate-launch, which computes the same placeholders)
  // may read it too.
  if (st.st_uid != owner && owner != 0) {
    throw file_error(
        path, "owned by uid " + std::to_string(st.st_uid) + ", not by the user sandgate runs as");
  }
  std::string bytes(PlaceholderKey::kSize + 1, '\0');
  std::size_t got = 0;
  while (got < bytes.size()) {
    const ssize_t n = ::read(fd, bytes.data() + got, bytes.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw file_error(path, std::strerror(errno));
    if (n == 0) break;
    got += static_cast<std::size_t>(n);
  }
  if (got != PlaceholderKey::kSize) {
    cleanse(bytes);
    throw file_error(path, "expected exactly " + std::to_string(PlaceholderKey::kSize) +
                               " bytes, found " + (got > PlaceholderKey::kSize ? "more" : "fewer"));
  }
  bytes.resize(got);
  return bytes;
}

}  // namespace

PlaceholderKey PlaceholderKey::generate() {
  std::string bytes(kSize, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(bytes.data()), static_cast<int>(kSize)) != 1) {
    throw std::runtime_error("placeholder key: the random generator failed");
  }
  PlaceholderKey key(std::make_shared<const SecretBytes>(bytes));
  cleanse(bytes);
  return key;
}

PlaceholderKey PlaceholderKey::from_bytes(std::string_view bytes) {
  if (bytes.size() != kSize) throw std::invalid_argument("placeholder key: expected 32 bytes");
  return PlaceholderKey(std::make_shared<const SecretBytes>(bytes));
}

std::string PlaceholderKey::problem(const std::string& path, uid_t owner) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NOFOLLOW);
  if (fd >= 0) {
    std::string problem;
    try {
      std::string bytes = read_key(fd, path, owner);
      cleanse(bytes);
    } catch (const std::runtime_error& e) {
      problem = e.what();
    }
    ::close(fd);
    return problem;
  }
  if (errno != ENOENT) return file_error(path, std::strerror(errno)).what();
  const std::string dir = std::filesystem::path(path).parent_path().string();
  struct stat st {};
  if (!dir.empty() && (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))) {
    return file_error(path, "directory " + dir +
                                " does not exist; the daemon creates the key but not its directory "
                                "(systemd's RuntimeDirectory= makes it)")
        .what();
  }
  return {};
}

PlaceholderKey PlaceholderKey::load_or_create(const std::string& path) {
  for (int attempt = 0; attempt < 2; ++attempt) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NOFOLLOW);
    if (fd >= 0) {
      std::string bytes;
      try {
        bytes = read_key(fd, path, ::geteuid());
      } catch (...) {
        ::close(fd);
        throw;
      }
      ::close(fd);
      PlaceholderKey key = from_bytes(bytes);
      cleanse(bytes);
      return key;
    }
    if (errno != ENOENT) throw file_error(path, std::strerror(errno));
    // Missing: create it with its final mode. A second process that wins the race makes
    // O_EXCL fail here; its key is then read on the next round.
    const int out = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (out < 0) {
      if (errno == EEXIST) continue;
      throw file_error(path, std::string("cannot create: ") + std::strerror(errno));
    }
    std::string bytes(kSize, '\0');
    const bool random =
        RAND_bytes(reinterpret_cast<unsigned char*>(bytes.data()), static_cast<int>(kSize)) == 1;
    const bool written =
        random && ::write(out, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size()) &&
        ::fsync(out) == 0;
    ::close(out);
    if (!written) {
      cleanse(bytes);
      ::unlink(path.c_str());
      throw file_error(path, "cannot write a new key");
    }
    PlaceholderKey key = from_bytes(bytes);
    cleanse(bytes);
    return key;
  }
  throw file_error(path, "created and removed by another process while reading");
}

std::string PlaceholderKey::placeholder_for(std::string_view sandbox,
                                            std::string_view credential) const {
  std::string message(kContext);
  message += '\0';
  message += sandbox;
  message += '\0';
  message += credential;
  const std::array<unsigned char, 32> digest = hmac_sha256(bytes_->view(), message);
  constexpr char kHex[] = "0123456789abcdef";
  std::string out(kPlaceholderPrefix);
  for (std::size_t i = 0; i < kPlaceholderDigits / 2 && i < digest.size(); ++i) {
    out += kHex[digest[i] >> 4];
    out += kHex[digest[i] & 0xf];
  }
  return out;
}

bool PlaceholderKey::operator==(const PlaceholderKey& other) const {
  const std::string_view a = bytes_->view();
  const std::string_view b = other.bytes_->view();
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

PlaceholderIndex::PlaceholderIndex(PlaceholderKey key,
                                   const std::vector<std::pair<std::string, std::string>>& pairs)
    : key_(std::move(key)) {
  for (const auto& [sandbox, credential] : pairs) add(sandbox, credential);
}

void PlaceholderIndex::add(const std::string& sandbox, const std::string& credential) {
  owners_.insert_or_assign(key_.placeholder_for(sandbox, credential), Owner{sandbox, credential});
}

void PlaceholderIndex::remove(std::string_view sandbox, std::string_view credential) {
  owners_.erase(key_.placeholder_for(sandbox, credential));
}

std::vector<PlaceholderHit> PlaceholderIndex::find_all(std::string_view text) const {
  std::vector<PlaceholderHit> hits;
  for (auto at = text.find(kPlaceholderPrefix); at != std::string_view::npos;
       at = text.find(kPlaceholderPrefix, at + 1)) {
    const std::size_t digits = at + kPlaceholderPrefix.size();
    if (text.size() < digits + kPlaceholderDigits) break;
    std::size_t n = 0;
    while (n < kPlaceholderDigits && is_hex_digit(text[digits + n])) ++n;
    if (n != kPlaceholderDigits) continue;
    if (text.size() > digits + n && is_hex_digit(text[digits + n])) continue;
    PlaceholderHit hit;
    hit.offset = at;
    hit.text = text.substr(at, kPlaceholderLength);
    if (const Owner* owner = owners_.find(hit.text)) {
      hit.sandbox = &owner->sandbox;
      hit.credential = &owner->credential;
    }
    hits.push_back(hit);
    at += kPlaceholderLength - 1;
  }
  return hits;
}

std::optional<PlaceholderHit> PlaceholderIndex::find(std::string_view text) const {
  if (!may_contain_placeholder(text)) return std::nullopt;
  auto hits = find_all(text);
  if (hits.empty()) return std::nullopt;
  return hits.front();
}

}  // namespace sandgate::secrets
