#pragma once

#include <boost/system/result.hpp>
#include <cstdint>
#include <string_view>
#include <system_error>

namespace sandgate {

// Every failure sandgate reports to a client, a log line or a metric. The wire name
// (code_name) is public contract: never reword one, add a new code instead.
enum class Errc {
  ok = 0,
  network_denied,           // SANDBOX_NETWORK_DENIED
  proxy_auth_required,      // PROXY_AUTH_REQUIRED
  too_many_connections,     // TOO_MANY_CONNECTIONS
  malformed_request,        // MALFORMED_REQUEST
  request_line_too_long,    // REQUEST_LINE_TOO_LONG
  headers_too_large,        // REQUEST_HEADERS_TOO_LARGE
  content_length_with_te,   // CONTENT_LENGTH_WITH_TRANSFER_ENCODING
  conflicting_length,       // CONFLICTING_CONTENT_LENGTH
  bad_transfer_encoding,    // UNSUPPORTED_TRANSFER_ENCODING
  obs_fold,                 // OBSOLETE_LINE_FOLDING
  invalid_header,           // INVALID_HEADER
  host_mismatch,            // HOST_MISMATCH
  unsupported_target,       // UNSUPPORTED_REQUEST_TARGET
  header_timeout,           // REQUEST_HEADER_TIMEOUT
  upstream_dns_failed,      // UPSTREAM_DNS_FAILED
  upstream_connect_failed,  // UPSTREAM_CONNECT_FAILED
  upstream_tls_failed,      // UPSTREAM_TLS_FAILED
  upstream_timeout,         // UPSTREAM_TIMEOUT
  upstream_protocol_error,  // UPSTREAM_PROTOCOL_ERROR
  credential_unavailable,   // CREDENTIAL_UNAVAILABLE
  too_many_dns_queries,     // TOO_MANY_DNS_QUERIES
  // MISDIRECTED_REQUEST (421): a request inside an intercepted stream addressed to another
  // authority than the one intercepted (domain fronting, HTTP/2 connection coalescing).
  misdirected_request,
  // CLIENT_TLS_FAILED: the client's TLS handshake with sandgate's leaf failed (it does not
  // trust sandgate's CA, or sent no TLS); no request was read.
  client_tls_failed,
  // TOO_MANY_LEAF_MINTS (429): the sandbox made sandgate mint more leaf certificates than
  // [interception] max_leaf_mints_per_minute allows (new names; cached leaves are free).
  too_many_leaf_mints,
  // LOCAL_RESOURCES_EXHAUSTED: sandgate itself ran out of descriptors or socket memory
  // (EMFILE, ENFILE, ENOBUFS, ENOMEM) opening what the exchange needs; a local overload.
  local_resources_exhausted,
  // HTTP2_CONNECTION_ERROR: sandgate ended an intercepted HTTP/2 connection because the client
  // flooded it or broke HTTP/2 (rapid reset, CONTINUATION, PING/SETTINGS, empty frames, more
  // streams than advertised); event.reason names which. The client got a GOAWAY.
  http2_connection_error,
  // UPSTREAM_ENCODING_UNSUPPORTED (502): a response from a host a credential is bound to
  // came in a Content-Encoding sandgate cannot decode to scan it for the token (an unknown
  // coding, before the head went out), or its encoded body turned out corrupt or decoded past
  // the bound (mid-body: the response is cut off).
  upstream_encoding_unsupported,
  // REQUEST_BODY_TOO_LARGE (413): a body sandgate must hold whole before the request may go
  // (to sign it again: a SigV4 request with no x-amz-content-sha256) is over the bound.
  request_body_too_large,
  // SIGNATURE_NOT_RESIGNABLE (400): a request to a host an aws_sigv4 rule binds, signed with
  // the sandbox's placeholder keys in a way sandgate cannot sign again (a presigned URL, an
  // Authorization or X-Amz-Date that does not parse, a signed field missing, SigV4a);
  // event.reason names which.
  signature_not_resignable,
  internal_error,  // INTERNAL_ERROR; last (all_error_codes() counts up to it)
};

// Which party a failure is blamed on; metrics split on it.
enum class Side { client, upstream, internal };

std::string_view code_name(Errc e);
// The HTTP status an explicit-proxy client receives for the code.
unsigned http_status(Errc e);
// Whether the same request may succeed if retried unchanged.
bool retryable(Errc e);
Side side_of(Errc e);

const std::error_category& sandgate_category();
inline std::error_code make_error_code(Errc e) {
  return {static_cast<int>(e), sandgate_category()};
}

template <class T>
using Result = boost::system::result<T, std::error_code>;

}  // namespace sandgate

template <>
struct std::is_error_code_enum<sandgate::Errc> : std::true_type {};
