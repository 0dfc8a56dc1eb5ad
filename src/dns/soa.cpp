// The SOA of a negative upstream reply, read with c-ares's own name expansion (the reply's
// names are compressed; ares_expand_name follows pointers and refuses loops).
#include <ares.h>

#include <algorithm>
#include <memory>

#include "common/ascii.hpp"
#include "dns/message.hpp"
#include "dns/wire_reader.hpp"

namespace sandgate::dns {

namespace {

// Expands the (possibly compressed) name at the cursor and moves past its encoding.
bool expand_name(WireReader& r, std::string* text) {
  const std::span<const std::uint8_t> in = r.message();
  if (r.pos() >= in.size()) return false;
  char* expanded = nullptr;
  long encoded_length = 0;
  if (ares_expand_name(in.data() + r.pos(), in.data(), static_cast<int>(in.size()), &expanded,
                       &encoded_length) != ARES_SUCCESS) {
    return false;
  }
  const std::unique_ptr<char, void (*)(void*)> owned(expanded, ares_free_string);
  if (encoded_length <= 0 || !r.skip(static_cast<std::size_t>(encoded_length))) return false;
  if (text) *text = expanded;
  return true;
}

// Whether `zone` is `name` or one of its parents (the root "" is everyone's).
bool is_zone_of(std::string_view zone, std::string_view name) {
  if (zone.empty()) return true;
  if (iequals_ascii(zone, name)) return true;
  return name.size() > zone.size() && name[name.size() - zone.size() - 1] == '.' &&
         iequals_ascii(name.substr(name.size() - zone.size()), zone);
}

// c-ares writes bytes that need escaping as "\X" or "\DDD"; sandgate passes on no such name.
bool plain(std::string_view text) {
  return text.find('\\') == std::string_view::npos;
}

}  // namespace

std::optional<Soa> authority_soa(std::span<const std::uint8_t> reply, std::string_view qname) {
  WireReader r(reply);
  std::uint16_t id = 0, flags = 0, qd = 0, an = 0, ns = 0, ar = 0;
  if (!r.u16(id) || !r.u16(flags) || !r.u16(qd) || !r.u16(an) || !r.u16(ns) || !r.u16(ar)) {
    return std::nullopt;
  }
  for (std::uint16_t i = 0; i < qd; ++i) {
    if (!expand_name(r, nullptr) || !r.skip(4)) return std::nullopt;
  }
  std::uint16_t type = 0, klass = 0, rdlength = 0;
  std::uint32_t ttl = 0;
  for (std::uint16_t i = 0; i < an; ++i) {
    if (!expand_name(r, nullptr) || !r.u16(type) || !r.u16(klass) || !r.u32(ttl) ||
        !r.u16(rdlength) || !r.skip(rdlength)) {
      return std::nullopt;
    }
  }
  for (std::uint16_t i = 0; i < ns; ++i) {
    Soa soa;
    if (!expand_name(r, &soa.zone) || !r.u16(type) || !r.u16(klass) || !r.u32(ttl) ||
        !r.u16(rdlength)) {
      return std::nullopt;
    }
    const std::size_t end = r.pos() + rdlength;
    if (type != kTypeSoa || klass != kClassIn) {
      if (!r.skip(rdlength)) return std::nullopt;
      continue;
    }
    if (!expand_name(r, &soa.mname) || !expand_name(r, &soa.rname) || !r.u32(soa.serial) ||
        !r.u32(soa.refresh) || !r.u32(soa.retry) || !r.u32(soa.expire) || !r.u32(soa.minimum) ||
        r.pos() != end) {
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
