#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "tls/client_hello.hpp"

namespace sandgate::proxy {

// What the first bytes a client sent on a stream say it is. One classifier for every entry
// mode (the CONNECT tunnel's gate, the transparent listener, and the gate of a transparent
// tunnel whose first bytes came late), so that no spelling is recognised by one and missed by
// another. It reads bytes as a lenient server would (THREATS 27): leading whitespace and
// empty lines are skipped, a method may be any token (RFC 9110) in any case, SP and HTAB both
// separate.
enum class StreamStart {
  need_more,      // a prefix of something that may still be TLS or HTTP
  tls,            // a whole ClientHello (`hello` is filled in)
  tls_malformed,  // TLS framing, but not a valid ClientHello (or over its bound)
  http,           // an HTTP/1 request line: method, target, "HTTP/" version
  proxy_request,  // a request meant for a proxy: CONNECT, or an absolute-form "scheme://"
  other,          // something else (ssh, SMTP, a binary protocol, HTTP/0.9)
  undecidable,    // kMaxUndecidedBytes and still not decided (e.g. endless empty lines)
};

// The most bytes the classifier waits for. A stream still undecided past this is refused:
// nothing that cannot be classified is ever relayed on the strength of its silence.
inline constexpr std::size_t kMaxUndecidedBytes = tls::kMaxClientHelloBytes;

struct FirstBytes {
  StreamStart kind = StreamStart::need_more;
  tls::ClientHelloInfo hello;  // tls
  std::size_t skipped = 0;     // http, proxy_request: leading whitespace before the method
};

// Classifies `data`, every byte the client has sent so far (looked at, never consumed). Call
// again with more bytes while it answers need_more. Pure; safe on arbitrary input.
FirstBytes classify_first_bytes(std::span<const std::uint8_t> data);

}  // namespace sandgate::proxy
