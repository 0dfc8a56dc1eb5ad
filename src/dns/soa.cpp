// The SOA of a negative upstream reply, read with c-ares's own name expansion (the reply's
// names are compressed; ares_expand_name follows pointers and refuses loops).
#include <ares.h>

#include <algorithm>
#include <memory>

#include "dns/message.hpp"

namespace sandgate::dns {

namespace {

// A bounds-checked cursor over a reply.
class ReplyReader {
 public:
  explicit ReplyReader(std::span<const std::uint8_t> in) : in_(in) {}

  // Expands the (possibly compressed) name at the cursor and moves past its encoding.
  bool name(std::string* text) {
    if (pos_ >= in_.size()) return false;
    char* expanded = nullptr;
    long encoded_length = 0;
    if (ares_expand_name(in_.data() + pos_, in_.data(), static_cast<int>(in_.size()), &expanded,
                         &encoded_length) != ARES_SUCCESS) {
      return false;
    }
    const std::unique_ptr<char, void (*)(void*)> owned(expanded, ares_free_string);
    if (encoded_length <= 0 || !skip(static_cast<std::size_t>(encoded_length))) return false;
    if (text) *text = expanded;
    return true;
  }
  bool u16(std::uint16_t& out) {
    if (in_.size() - pos_ < 2) return false;
    out = static_cast<std::uint16_t>(in_[pos_] << 8 | in_[pos_ + 1]);
    pos_ += 2;
    return true;
  }
  bool u32(std::uint32_t& out) {
    std::uint16_t hi = 0, lo = 0;
    if (!u16(hi) || !u16(lo)) return false;
    out = std::uint32_t{hi} << 16 | lo;
    return true;
  }
  bool skip(std::size_t n) {
    if (n > in_.size() - pos_) return false;
    pos_ += n;
    return true;
  }
  std::size_t pos() const { return pos_; }

 private:
  std::span<const std::uint8_t> in_;
  std::size_t pos_ = 0;
};

char lower(char c) {
  return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
}

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(),
                                            [](char x, char y) { return lower(x) == lower(y); });
}

// Whether `zone` is `name` or one of its parents (the root "" is everyone's).
bool is_zone_of(std::string_view zone, std::string_view name) {
  if (zone.empty()) return true;
  if (iequals(zone, name)) return true;
  return name.size() > zone.size() && name[name.size() - zone.size() - 1] == '.' &&
         iequals(name.substr(name.size() - zone.size()), zone);
}

// c-ares writes bytes that need escaping as "\X" or "\DDD"; sandgate passes on no such name.
bool plain(std::string_view text) {
  return text.find('\\') == std::string_view::npos;
}

}  // namespace

std::optional<Soa> authority_soa(std::span<const std::uint8_t> reply, std::string_view qname) {
  ReplyReader r(reply);
  std::uint16_t id = 0, flags = 0, qd = 0, an = 0, ns = 0, ar = 0;
  if (!r.u16(id) || !r.u16(flags) || !r.u16(qd) || !r.u16(an) || !r.u16(ns) || !r.u16(ar)) {
    return std::nullopt;
  }
  for (std::uint16_t i = 0; i < qd; ++i) {
    if (!r.name(nullptr) || !r.skip(4)) return std::nullopt;
  }
  std::uint16_t type = 0, klass = 0, rdlength = 0;
  std::uint32_t ttl = 0;
  for (std::uint16_t i = 0; i < an; ++i) {
    if (!r.name(nullptr) || !r.u16(type) || !r.u16(klass) || !r.u32(ttl) || !r.u16(rdlength) ||
        !r.skip(rdlength)) {
      return std::nullopt;
    }
  }
  for (std::uint16_t i = 0; i < ns; ++i) {
    Soa soa;
    if (!r.name(&soa.zone) || !r.u16(type) || !r.u16(klass) || !r.u32(ttl) || !r.u16(rdlength)) {
      return std::nullopt;
    }
    const std::size_t end = r.pos() + rdlength;
    if (type != kTypeSoa || klass != kClassIn) {
      if (!r.skip(rdlength)) return std::nullopt;
      continue;
    }
    if (!r.name(&soa.mname) || !r.name(&soa.rname) || !r.u32(soa.serial) || !r.u32(soa.refresh) ||
        !r.u32(soa.retry) || !r.u32(soa.expire) || !r.u32(soa.minimum) || r.pos() != end) {
      return std::nullopt;
    }
    if (!plain(soa.zone) || !plain(soa.mname) || !plain(soa.rname) ||
        !is_zone_of(soa.zone, qname)) {
      return std::nullopt;
    }
    // TTLs with the top bit set count as 0 (RFC 2181 §8).
    const std::uint32_t record_ttl = ttl > 0x7FFFFFFFU ? 0 : ttl;
    soa.ttl = std::min(record_ttl, soa.minimum > 0x7FFFFFFFU ? 0 : soa.minimum);
    return soa;
  }
  return std::nullopt;
}

}  // namespace sandgate::dns
