#pragma once

#include <algorithm>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/fields.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/parser.hpp>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "common/arena.hpp"
#include "common/errc.hpp"
#include "http/request_target.hpp"

namespace sandgate::http {

// Size limits for one request head, checked before anything is parsed.
struct HeadLimits {
  std::size_t max_request_line = 8192;   // bytes before the first CRLF
  std::size_t max_header_bytes = 65536;  // the whole head including the final CRLFCRLF
};

// Finds the end of the head in the bytes buffered so far: the offset just past the first
// "\r\n\r\n", or 0 while more bytes are needed. Fails as soon as the buffered bytes prove the
// head bad, so a reader can stop early:
//   request line over the limit -> request_line_too_long; head over the limit -> headers_too_large;
//   a CR not followed by LF or an LF not preceded by CR -> malformed_request in the request line,
//   invalid_header after it.
// Scans from the start on every call; the caller bounds the buffer by max_header_bytes.
Result<std::size_t> find_head_end(std::string_view buffered, const HeadLimits& limits);

// One client request head, parsed by Beast after sandgate's own stricter byte-level checks.
// Move-only: it keeps Beast's parser, stopped where the body begins, so the body is read on
// from there (parser(std::move(head.parser)) with another body type) and the head is never
// parsed twice.
struct RequestHead {
  using Form = TargetForm;
  using Message = boost::beast::http::request<boost::beast::http::empty_body>;
  using Parser = boost::beast::http::request_parser<boost::beast::http::empty_body>;

  // The parsed message. Validated, but hop-by-hop fields are still present: the caller reads
  // Proxy-Authorization first, then calls strip_hop_by_hop before forwarding.
  Message& msg() { return parser->get(); }
  const Message& msg() const { return parser->get(); }

  std::unique_ptr<Parser> parser;  // never null in a parsed head; its header is complete
  Form form = Form::origin;
  std::string scheme;          // "http" for the absolute form; empty otherwise
  std::string host;            // target authority, or Host for origin/asterisk form; raw
  std::uint16_t port = 80;     // explicit, else 80; for CONNECT the required port
  std::string path_and_query;  // what to send upstream in origin form: "/" if the target had none
  bool has_body = false;       // chunked, or Content-Length > 0
  bool chunked = false;
  std::optional<std::uint64_t> content_length;
  bool keep_alive = false;  // from every Connection field; Proxy-Connection is ignored
  // An Upgrade field and the "upgrade" connection option (RFC 9110 §7.8): the server may
  // switch the connection to another protocol after this request.
  bool upgrade = false;
};

// Validates and parses a raw head: exactly the bytes up to and including the CRLFCRLF that
// find_head_end located. Every refusal is a client error (Side::client):
//   malformed_request       request line (method, target bytes, fragment, version other than
//                           HTTP/1.0 or 1.1), a non-numeric Content-Length, a body on CONNECT,
//                           leading empty lines, trailing bytes after the head
//   request_line_too_long / headers_too_large   over HeadLimits
//   content_length_with_te  both present, in either order and whatever the TE value
//   conflicting_length      Content-Length repeated (even with the same value) or a list ("5, 5")
//   bad_transfer_encoding   anything but one Transfer-Encoding field equal to "chunked", or any
//                           Transfer-Encoding on HTTP/1.0
//   obs_fold                a field line starting with SP or HTAB
//   invalid_header          bad field-name token (incl. whitespace before ':'), control bytes in a
//                           value, bare CR/LF, HTTP/1.1 without Host, Host repeated or unparsable
//   host_mismatch           Host disagrees with an absolute-form or CONNECT authority
//   unsupported_target      see parse_request_target
// The origin form is returned as such; an explicit proxy decides whether to refuse it.
Result<RequestHead> parse_request_head(std::string_view head, const HeadLimits& limits);

// Whether a request that came over HTTP/2 (its :method, its :path and its field values, which
// nghttp2 checked against HTTP/2's looser rules) is one parse_request_head takes from an
// HTTP/1.1 client: a method token, a target in origin form (or "*" for OPTIONS) that
// parse_request_target accepts (no '#', no byte outside the URI set, no bad %-escape), field
// values without control bytes. Errc::ok, or the error parse_request_head would give. The
// HTTP/2 bridge refuses any other request (400), so what it forwards, as HTTP/1.1 or HTTP/2, is
// held to the grammar an HTTP/1.1 client is held to.
Errc check_h2_request(std::string_view method, std::string_view target,
                      std::span<const std::string_view> field_values);

// The arena a response's fields live in while sandgate relays it (http_forward.cpp): one per
// exchange, in its coroutine frame, so a response head of usual size (nginx's ten fields are
// about 0.9 KiB of Beast nodes) costs no malloc per field, and an idle connection holds none.
inline constexpr std::size_t kResponseArenaBytes = 2048;
using ResponseArena = common::InlineArena<kResponseArenaBytes>;
using ArenaFields =
    boost::beast::http::basic_fields<common::ArenaAllocator<char, kResponseArenaBytes>>;

// The first field named `name` (end() if none): the one Beast's operator[] and find() return,
// found by walking the fields in order, each of which knows its name as an enum. Beast's own
// lookup searches its index with a case-insensitive comparison of names, which cost ~800
// instructions for a Proxy-Authorization lookup in a head of a few fields (S2, issue 13).
// `name` is a known field: every field Beast does not know has the name field::unknown.
template <class Fields>
typename Fields::const_iterator first_field(const Fields& f, boost::beast::http::field name) {
  return std::find_if(f.begin(), f.end(), [name](const auto& e) { return e.name() == name; });
}

// The value of first_field, or empty when there is none (as Beast's operator[]).
template <class Fields>
std::string_view first_value(const Fields& f, boost::beast::http::field name) {
  const auto it = first_field(f, name);
  if (it == f.end()) return {};
  return {it->value().data(), it->value().size()};
}

// Removes hop-by-hop fields (RFC 9110 §7.6.1) before a message is forwarded, request or
// response alike (both headers derive from fields): Connection and every field it names,
// Proxy-Connection, Keep-Alive, TE, Upgrade, Proxy-Authorization and Proxy-Authenticate.
// Trailer and Transfer-Encoding stay; the caller owns framing. Connection cannot remove Host,
// Content-Length or Transfer-Encoding: dropping those would change how the upstream frames the
// message it receives, which is how hop-by-hop abuse turns into smuggling.
void strip_hop_by_hop(boost::beast::http::fields& f);
void strip_hop_by_hop(ArenaFields& f);

// Removes the fields of a request that never leave sandgate, whatever the client's wire
// (THREATS 36): what is said to a proxy (Proxy-Authorization, Proxy-Authenticate,
// Proxy-Connection), Keep-Alive, and HTTP2-Settings (h2c; THREATS 20). Connection, Upgrade,
// TE and the framing fields are the wire's own business (strip_hop_by_hop on HTTP/1.1; HTTP/2
// refuses them, but for "TE: trailers", which gRPC needs end to end).
void strip_proxy_only(boost::beast::http::fields& f);

// Whether a request with this method may be sent again after a connection broke before its
// response: GET, HEAD, OPTIONS, TRACE, PUT and DELETE (RFC 9110 9.2.2). Methods are
// case-sensitive; any other, POST and PATCH above all, may have been acted on once already.
bool idempotent_method(std::string_view method);

// A message header as one piece of text, byte for byte what Beast's serializer writes for it
// (start line, the fields in order, the empty line), so a message that is not re-framed goes
// out in one contiguous write instead of one buffer per field.
std::string head_text(const boost::beast::http::request_header<>& h);
std::string head_text(const boost::beast::http::response_header<>& h);
std::string head_text(const boost::beast::http::response_header<ArenaFields>& h);

}  // namespace sandgate::http
