#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/errc.hpp"
#include "policy/policy.hpp"

namespace sandgate::proxy {

// What an explicit-proxy client is told when sandgate refuses or fails its request. Every
// response carries `X-Sandgate-Error: CODE`, a JSON body and `Connection: close`.
struct ErrorInfo {
  Errc code = Errc::internal_error;
  std::string_view sandbox;
  std::string_view host;
  std::uint16_t port = 0;
  std::string_view reason;        // policy reason name, for denials; auth_refusal's, for 407s
  std::string_view rule;          // deciding rule, for denials
  std::string_view suggestion;    // config line that would allow it, for denials
  std::string_view message;       // human-readable detail; never contains a secret
  std::optional<bool> retryable;  // overrides retryable(code) when set
};

// A response sandgate answers itself, whatever the codec carries it: HTTP/1.1 text
// (http1_text) or one HTTP/2 stream.
struct Reply {
  unsigned status = 500;
  // The HTTP/1.1 reason phrase (reason_phrase() for an error); "" = the status's usual one.
  // HTTP/2 has none: there the body says it all.
  std::string reason;
  std::vector<std::pair<std::string, std::string>> fields;  // besides Content-Length
  std::string body;
};

// The status line's reason phrase of an error reply, which many clients print as all they say
// about a refused request (wget, Python's http.client, pip, Go, npm, apt): the code, the
// destination, the sandbox, the denial reason and whether a retry can help, e.g.
// "SANDBOX_NETWORK_DENIED example.com:443 for sandbox agent-1 (no_matching_rule; not
// retryable)". Printable ASCII only (any other byte of a host, id or reason becomes '?', so
// nothing can end the line), at most kMaxReasonPhraseBytes (a long host keeps its rightmost
// part after "..."), and never a secret: it holds no message, path, query or header value.
inline constexpr std::size_t kMaxReasonPhraseBytes = 160;
std::string reason_phrase(const ErrorInfo& info);

// The error reply: `X-Sandgate-Error: CODE`, a JSON body, `Connection: close`.
Reply error_reply(const ErrorInfo& info);
// The whole HTTP/1.1 response (head with Content-Length, then the body).
std::string http1_text(const Reply& reply);

// The whole HTTP/1.1 error response (head and body) as bytes ready to write.
std::string error_response(const ErrorInfo& info);

// A refused git smart-HTTP discovery request (GET .../info/refs?service=SERVICE) answered the
// way git shows it: 200, the service's advertisement type, and one pkt-line "ERR <message>",
// which git prints as "remote error: <message>" and stops (a 403 would only read "The
// requested URL returned error: 403"). The message is `info` in one line.
Reply git_refusal_reply(std::string_view service, const ErrorInfo& info);

// A default human message for a code.
std::string_view default_message(Errc code);

// A fatal TLS alert record (access_denied), sent to a TLS client instead of an HTTP error
// once a tunnel is established.
std::string_view tls_access_denied_alert();

}  // namespace sandgate::proxy
