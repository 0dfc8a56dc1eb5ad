// DNS wire codec for the sandbox DNS listener (RFC 1035, RFC 6891 EDNS(0), RFC 8914 EDE).
#include "dns/message.hpp"

#include <algorithm>

#include "dns/wire_reader.hpp"

namespace sandgate::dns {

namespace {

constexpr std::size_t kMaxNameWireBytes = 255;
constexpr std::size_t kOptFixedBytes = 11;  // root name, type, class, ttl, rdlength
constexpr std::size_t kEdeFixedBytes = 6;   // option code, length, INFO-CODE

bool plain_label_byte(std::uint8_t c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_';
}

// Reads an uncompressed name; appends its text form to `text` (unless null).
bool read_name(WireReader& r, std::string* text) {
  const std::size_t start = r.pos();
  for (;;) {
    std::uint8_t len = 0;
    if (!r.u8(len)) return false;
    if (len == 0) break;
    if ((len & 0xC0) != 0) return false;  // compression pointer or reserved label type
    if (text && !text->empty()) text->push_back('.');
    const std::size_t label_start = r.pos();
    if (!r.skip(len)) return false;
    if (text) {
      for (const std::uint8_t c : r.bytes(label_start, r.pos())) {
        if (plain_label_byte(c)) {
          text->push_back(static_cast<char>(c));
        } else {
          text->push_back('\\');
          text->push_back(static_cast<char>('0' + c / 100));
          text->push_back(static_cast<char>('0' + c / 10 % 10));
          text->push_back(static_cast<char>('0' + c % 10));
        }
      }
    }
    if (r.pos() - start > kMaxNameWireBytes) return false;
  }
  if (r.pos() - start > kMaxNameWireBytes) return false;
  if (text && text->empty()) *text = ".";
  return true;
}

// Reads the OPT record after its (root) name. Options must tile the RDATA exactly.
bool read_opt(WireReader& r, Query& q) {
  std::uint8_t root = 0;
  std::uint16_t type = 0, size = 0, rdlength = 0;
  std::uint32_t ttl = 0;
  if (!r.u8(root) || root != 0 || !r.u16(type) || type != kTypeOpt) return false;
  if (!r.u16(size) || !r.u32(ttl) || !r.u16(rdlength)) return false;
  if ((ttl >> 16 & 0xFF) != 0) return false;  // EDNS version 0 only
  const std::size_t end = r.pos() + rdlength;
  while (r.pos() < end) {
    std::uint16_t code = 0, length = 0;
    if (!r.u16(code) || !r.u16(length) || !r.skip(length)) return false;
  }
  if (r.pos() != end) return false;
  q.has_opt = true;
  q.udp_size = size;
  return true;
}

void put16(std::vector<std::uint8_t>& out, std::size_t v) {
  out.push_back(static_cast<std::uint8_t>(v >> 8 & 0xFF));
  out.push_back(static_cast<std::uint8_t>(v & 0xFF));
}

void put32(std::vector<std::uint8_t>& out, std::uint32_t v) {
  put16(out, v >> 16);
  put16(out, v & 0xFFFF);
}

// Header with QR=1, RA=1, the query's id, opcode and RD, and the given counts.
void put_header(std::vector<std::uint8_t>& out, const Header& h, Rcode rcode, bool tc,
                std::size_t qd, std::size_t an, std::size_t ar, std::size_t ns = 0) {
  put16(out, h.id);
  std::uint16_t flags = 0x8000;  // QR
  flags |= static_cast<std::uint16_t>((h.opcode & 0x0F) << 11);
  if (tc) flags |= 0x0200;
  if (h.rd) flags |= 0x0100;
  flags |= 0x0080;  // RA
  flags |= static_cast<std::uint16_t>(static_cast<std::uint8_t>(rcode) & 0x0F);
  put16(out, flags);
  put16(out, qd);
  put16(out, an);
  put16(out, ns);
  put16(out, ar);
}

// OPT record offering kMaxUdpBytes, with one EDE option when `ede` is given.
void put_opt(std::vector<std::uint8_t>& out, std::optional<std::string_view> ede,
             std::uint16_t info_code = kEdeBlocked) {
  out.push_back(0);  // root
  put16(out, kTypeOpt);
  put16(out, kMaxUdpBytes);
  put32(out, 0);  // extended rcode 0, version 0, no flags
  if (!ede) {
    put16(out, 0);
    return;
  }
  put16(out, kEdeFixedBytes + ede->size());
  put16(out, kOptionEde);
  put16(out, 2 + ede->size());
  put16(out, info_code);
  out.insert(out.end(), ede->begin(), ede->end());
}

// One A or AAAA record of `a` for the question's name (a pointer to it).
void put_address_record(std::vector<std::uint8_t>& out, const Query& q, const policy::IpAddress& a,
                        std::uint32_t ttl) {
  put16(out, 0xC000 | kHeaderBytes);  // pointer to the question name
  put16(out, q.qtype);
  put16(out, kClassIn);
  put32(out, ttl);
  put16(out, a.size());
  out.insert(out.end(), a.bytes.begin(), a.bytes.begin() + static_cast<std::ptrdiff_t>(a.size()));
}

// Header and question of a response to `q`; the caller appends records.
std::vector<std::uint8_t> start_response(const Query& q, Rcode rcode, bool tc, std::size_t an) {
  std::vector<std::uint8_t> out;
  out.reserve(kHeaderBytes + q.question.size() + kOptFixedBytes);
  put_header(out, q.header, rcode, tc, 1, an, q.has_opt ? 1 : 0);
  out.insert(out.end(), q.question.begin(), q.question.end());
  return out;
}

// Appends a name given as text (labels joined by '.', no trailing dot; "" for the root) in
// uncompressed wire form. False, with `out` unchanged, for an empty or over-long label or name.
bool put_name(std::vector<std::uint8_t>& out, std::string_view text) {
  const std::size_t start = out.size();
  std::size_t at = 0;
  while (!text.empty() && at <= text.size()) {
    const std::size_t dot = std::min(text.find('.', at), text.size());
    const std::size_t len = dot - at;
    if (len == 0 || len > 63) {
      out.resize(start);
      return false;
    }
    out.push_back(static_cast<std::uint8_t>(len));
    out.insert(out.end(), text.begin() + static_cast<std::ptrdiff_t>(at),
               text.begin() + static_cast<std::ptrdiff_t>(dot));
    at = dot + 1;
  }
  out.push_back(0);
  if (out.size() - start > kMaxNameWireBytes) {
    out.resize(start);
    return false;
  }
  return true;
}

// The SOA resource record in wire form, or empty when a name cannot be encoded.
std::vector<std::uint8_t> soa_record(const Soa& soa) {
  std::vector<std::uint8_t> rdata;
  if (!put_name(rdata, soa.mname) || !put_name(rdata, soa.rname)) return {};
  for (const std::uint32_t v : {soa.serial, soa.refresh, soa.retry, soa.expire, soa.minimum}) {
    put32(rdata, v);
  }
  std::vector<std::uint8_t> rr;
  if (!put_name(rr, soa.zone)) return {};
  put16(rr, kTypeSoa);
  put16(rr, kClassIn);
  put32(rr, soa.ttl);
  put16(rr, rdata.size());
  rr.insert(rr.end(), rdata.begin(), rdata.end());
  return rr;
}

bool family_matches(const Query& q, const policy::IpAddress& a) {
  return q.qtype == kTypeA ? a.is_v4() : !a.is_v4();
}

}  // namespace

std::optional<Header> read_header(std::span<const std::uint8_t> message) {
  if (message.size() < kHeaderBytes) return std::nullopt;
  Header h;
  h.id = static_cast<std::uint16_t>(message[0] << 8 | message[1]);
  h.opcode = static_cast<std::uint8_t>(message[2] >> 3 & 0x0F);
  h.rd = (message[2] & 0x01) != 0;
  return h;
}

std::variant<Query, ParseError> parse_query(std::span<const std::uint8_t> message) {
  const auto header = read_header(message);
  if (!header) return ParseError{Rcode::formerr, std::nullopt};
  const ParseError formerr{Rcode::formerr, header};
  const bool qr = (message[2] & 0x80) != 0;
  if (qr || header->opcode != 0) return formerr;

  WireReader r(message);
  std::uint16_t skip16 = 0, qd = 0, an = 0, ns = 0, ar = 0;
  if (!r.u16(skip16) || !r.u16(skip16) || !r.u16(qd) || !r.u16(an) || !r.u16(ns) || !r.u16(ar)) {
    return formerr;
  }
  if (qd != 1 || an != 0 || ns != 0 || ar > 1) return formerr;

  Query q;
  q.header = *header;
  const std::size_t question_start = r.pos();
  std::uint16_t qclass = 0;
  if (!read_name(r, &q.name) || !r.u16(q.qtype) || !r.u16(qclass)) return formerr;
  if (qclass != kClassIn) return formerr;
  const auto question = r.bytes(question_start, r.pos());
  q.question.assign(question.begin(), question.end());

  if (ar == 1 && !read_opt(r, q)) return formerr;
  if (!r.at_end()) return formerr;
  return q;
}

std::size_t udp_limit(const Query& q) {
  if (!q.has_opt) return kClassicUdpBytes;
  return std::clamp<std::size_t>(q.udp_size, kClassicUdpBytes, kMaxUdpBytes);
}

std::vector<std::uint8_t> build_answer(const Query& q, std::span<const policy::IpAddress> addresses,
                                       std::uint32_t ttl, std::size_t max_bytes) {
  const bool answerable = q.qtype == kTypeA || q.qtype == kTypeAaaa;
  std::size_t count = 0;
  std::size_t size = kHeaderBytes + q.question.size() + (q.has_opt ? kOptFixedBytes : 0);
  for (const auto& a : addresses) {
    if (!answerable || !family_matches(q, a)) continue;
    ++count;
    size += 12 + a.size();  // pointer, type, class, ttl, rdlength, rdata
  }
  const bool truncated = size > max_bytes;
  if (truncated) count = 0;

  std::vector<std::uint8_t> out = start_response(q, Rcode::noerror, truncated, count);
  for (const auto& a : addresses) {
    if (truncated || !answerable || !family_matches(q, a)) continue;
    put_address_record(out, q, a, ttl);
  }
  if (q.has_opt) put_opt(out, std::nullopt);
  return out;
}

namespace {

// The OPT record of a query that had one, with an Extended DNS Error (`info_code`, `text`
// cut so that the whole response stays within max_bytes).
void put_ede_opt(std::vector<std::uint8_t>& out, const Query& q, std::string_view text,
                 std::size_t max_bytes, std::uint16_t info_code) {
  if (!q.has_opt) return;
  const std::size_t fixed = out.size() + kOptFixedBytes + kEdeFixedBytes;
  const std::size_t room = max_bytes > fixed ? max_bytes - fixed : 0;
  if (text.size() > room) text = text.substr(0, room);
  put_opt(out, text, info_code);
}

}  // namespace

std::vector<std::uint8_t> build_sink(const Query& q, const policy::IpAddress& sink,
                                     std::uint32_t ttl, std::string_view text,
                                     std::size_t max_bytes) {
  const bool answered = q.qtype == kTypeA && family_matches(q, sink);
  std::vector<std::uint8_t> out = start_response(q, Rcode::noerror, false, answered ? 1 : 0);
  if (answered) put_address_record(out, q, sink, ttl);
  put_ede_opt(out, q, text, max_bytes, kEdeBlocked);
  return out;
}

std::vector<std::uint8_t> build_negative(const Query& q, Rcode rcode, const Soa* soa,
                                         std::size_t max_bytes) {
  std::vector<std::uint8_t> rr = soa ? soa_record(*soa) : std::vector<std::uint8_t>{};
  const std::size_t size =
      kHeaderBytes + q.question.size() + rr.size() + (q.has_opt ? kOptFixedBytes : 0);
  if (size > max_bytes) rr.clear();  // the negative answer still fits; the SOA is a hint
  std::vector<std::uint8_t> out;
  out.reserve(size);
  put_header(out, q.header, rcode, false, 1, 0, q.has_opt ? 1 : 0, rr.empty() ? 0 : 1);
  out.insert(out.end(), q.question.begin(), q.question.end());
  out.insert(out.end(), rr.begin(), rr.end());
  if (q.has_opt) put_opt(out, std::nullopt);
  return out;
}

std::vector<std::uint8_t> build_refusal(const Query& q, std::string_view text,
                                        std::size_t max_bytes, std::uint16_t info_code) {
  std::vector<std::uint8_t> out = start_response(q, Rcode::refused, false, 0);
  put_ede_opt(out, q, text, max_bytes, info_code);
  return out;
}

std::vector<std::uint8_t> build_error(const Query& q, Rcode rcode) {
  std::vector<std::uint8_t> out = start_response(q, rcode, false, 0);
  if (q.has_opt) put_opt(out, std::nullopt);
  return out;
}

std::vector<std::uint8_t> build_header_error(const Header& h, Rcode rcode) {
  std::vector<std::uint8_t> out;
  out.reserve(kHeaderBytes);
  put_header(out, h, rcode, false, 0, 0, 0);
  return out;
}

}  // namespace sandgate::dns
