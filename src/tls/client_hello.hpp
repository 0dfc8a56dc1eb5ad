#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace sandgate::tls {

// The most record-framed bytes the peeker will look at. A ClientHello that needs more is
// refused as malformed, so a session never buffers more than this before deciding.
inline constexpr std::size_t kMaxClientHelloBytes = std::size_t{64} * 1024;

enum class PeekStatus {
  need_more,  // a prefix of something that may still become a valid ClientHello
  complete,   // a whole, well-formed ClientHello; `hello` is filled in
  not_tls,    // the first bytes are not a TLS handshake record (plain HTTP, SSLv2, ...)
  malformed,  // TLS framing, but something is wrong or it exceeds kMaxClientHelloBytes
};

// What the proxy needs from a ClientHello to decide before relaying it.
struct ClientHelloInfo {
  std::optional<std::string> sni;  // raw host_name, printable ASCII; normalised by policy
  std::vector<std::string> alpn;   // protocol names in the client's order, raw bytes
  bool has_ech = false;            // encrypted_client_hello (0xfe0d): the SNI is the outer name
};

struct PeekResult {
  PeekStatus status = PeekStatus::need_more;
  ClientHelloInfo hello;              // status == complete only
  std::size_t bytes_needed_hint = 0;  // need_more: at least this many more bytes are needed
  std::size_t record_bytes = 0;       // complete: bytes of `data` taken by the ClientHello records
};

// Parses the bytes a client has sent so far on a fresh connection. The bytes are only looked at,
// never consumed: the caller relays them unchanged once it has decided. Handles a ClientHello
// split across TCP segments (need_more) and across several consecutive handshake records.
// Every length field is checked against its container; bytes after the ClientHello records are
// ignored. Pure and allocation-bounded: safe on arbitrary input.
PeekResult peek_client_hello(std::span<const std::uint8_t> data);

// True when the bytes start like a TLS handshake record: content type 22 and major version 3.
// Needs at least two bytes.
bool looks_like_tls(std::span<const std::uint8_t> data);

}  // namespace sandgate::tls
