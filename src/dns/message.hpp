#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "policy/ip_address.hpp"

namespace sandgate::dns {

// The DNS wire codec of the sandbox DNS listener: strict parsing of one query and building
// of the few responses sandgate gives. Pure functions over byte spans; every length is
// checked before it is read, nothing is allocated beyond the message itself, and no input
// can make a function throw or loop (no name compression is followed).

enum class Rcode : std::uint8_t {
  noerror = 0,
  formerr = 1,
  servfail = 2,
  nxdomain = 3,
  notimp = 4,
  refused = 5,
};

inline constexpr std::uint16_t kTypeA = 1;
inline constexpr std::uint16_t kTypeAaaa = 28;
inline constexpr std::uint16_t kTypeOpt = 41;
inline constexpr std::uint16_t kClassIn = 1;
inline constexpr std::size_t kHeaderBytes = 12;
// A UDP response to a client without EDNS is at most this long (RFC 1035 4.2.1).
inline constexpr std::size_t kClassicUdpBytes = 512;
// Largest UDP payload sandgate offers and uses, whatever the client advertises (the DNS
// flag-day 2020 value, which avoids IP fragmentation).
inline constexpr std::size_t kMaxUdpBytes = 1232;
// Largest DNS message at all (the TCP length prefix is 16 bits).
inline constexpr std::size_t kMaxMessageBytes = 65535;
// RFC 8914 Extended DNS Error: option code, and INFO-CODE 15 "Blocked".
inline constexpr std::uint16_t kOptionEde = 15;
inline constexpr std::uint16_t kEdeBlocked = 15;
// INFO-CODE 0 "Other": a refusal that is no policy decision (a sandbox over its budget).
inline constexpr std::uint16_t kEdeOther = 0;

// The fixed 12-byte header fields a response copies.
struct Header {
  std::uint16_t id = 0;
  std::uint8_t opcode = 0;
  bool rd = false;
};

// One validated query: exactly one question of class IN, opcode QUERY, QR=0, no answer or
// authority records, at most an OPT record in the additional section.
struct Query {
  Header header;
  // The question name as text: labels joined by '.', no trailing dot, "." for the root. Bytes
  // other than letters, digits, '-' and '_' (a '.' inside a label included) are written as
  // \DDD, which no host normalisation accepts, so such a name is refused as invalid.
  std::string name;
  std::uint16_t qtype = 0;
  // The question section exactly as received (name, type, class), echoed in the response.
  std::vector<std::uint8_t> question;
  bool has_opt = false;        // the query carried an EDNS(0) OPT record
  std::uint16_t udp_size = 0;  // the client's advertised UDP payload size (OPT class)
};

// Reads the header; nullopt when fewer than 12 bytes (nothing to answer: drop).
std::optional<Header> read_header(std::span<const std::uint8_t> message);

// Why parse_query refused: the code to answer with and the header to answer to (none when
// the message is too short to carry one: drop it).
struct ParseError {
  Rcode rcode = Rcode::formerr;
  std::optional<Header> header;
};

// Parses and validates one query. Anything malformed or outside what a stub resolver sends
// (several questions, a compression pointer or reserved label type in the question, a class
// other than IN, a non-zero EDNS version, records other than one OPT, trailing bytes) is an
// error with Rcode::formerr.
std::variant<Query, ParseError> parse_query(std::span<const std::uint8_t> message);

// The UDP payload limit for the response to `q`: 512 without EDNS, else the client's
// advertised size clamped to [512, kMaxUdpBytes].
std::size_t udp_limit(const Query& q);

// NOERROR with one A or AAAA record per address of the query's family (others are skipped),
// each pointing back at the question name, with `ttl`. No matching address: NODATA (NOERROR,
// no answers). If the message would exceed `max_bytes`, the answers are left out and TC is set.
std::vector<std::uint8_t> build_answer(const Query& q, std::span<const policy::IpAddress> addresses,
                                       std::uint32_t ttl, std::size_t max_bytes);

// The answer to a name the policy refused, when refusals go to the sink (docs/dns.md):
// NOERROR with one A record of `sink` for an A question, none (NODATA) for any other, and,
// when the query had an OPT record, the Extended DNS Error `text` (Blocked), cut short so the
// message fits in `max_bytes` (the A record always fits: a question is at most 255 bytes).
std::vector<std::uint8_t> build_sink(const Query& q, const policy::IpAddress& sink,
                                     std::uint32_t ttl, std::string_view text,
                                     std::size_t max_bytes);

inline constexpr std::uint16_t kTypeSoa = 6;

// The SOA record of a negative upstream answer (RFC 2308), as sandgate passes it on so that a
// client can cache the negative answer. Names are text: labels joined by '.', no trailing dot.
struct Soa {
  std::string zone;   // the record's owner: the zone apex
  std::string mname;  // primary server
  std::string rname;  // responsible mailbox
  std::uint32_t serial = 0, refresh = 0, retry = 0, expire = 0, minimum = 0;
  std::uint32_t ttl = 0;  // the TTL to send it with
};

// The SOA in the authority section of an upstream reply (compressed names expanded by
// c-ares), when its owner is `qname` or a parent of it (any other is not this name's zone and
// is ignored); its ttl is min(record TTL, MINIMUM) (RFC 2308 §5). Nullopt when there is none,
// the reply is malformed, or a name holds bytes that would need escaping.
std::optional<Soa> authority_soa(std::span<const std::uint8_t> reply, std::string_view qname);

// A negative answer, NXDOMAIN (Rcode::nxdomain) or NODATA (Rcode::noerror, no answers), with
// `soa` in the authority section when given and when it fits in `max_bytes` (else without it).
std::vector<std::uint8_t> build_negative(const Query& q, Rcode rcode, const Soa* soa,
                                         std::size_t max_bytes);

// REFUSED. When the query had an OPT record, the response carries one with an Extended DNS
// Error (INFO-CODE `info_code`, Blocked unless told) whose EXTRA-TEXT is `text`, cut short so
// the message fits in `max_bytes`.
std::vector<std::uint8_t> build_refusal(const Query& q, std::string_view text,
                                        std::size_t max_bytes,
                                        std::uint16_t info_code = kEdeBlocked);

// Any other rcode (SERVFAIL...) with the question echoed, and an empty OPT when the query had
// one.
std::vector<std::uint8_t> build_error(const Query& q, Rcode rcode);

// A response made from the header alone, with no question (FORMERR for what did not parse).
std::vector<std::uint8_t> build_header_error(const Header& h, Rcode rcode);

}  // namespace sandgate::dns
