#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "common/errc.hpp"
#include "policy/host.hpp"

namespace sandgate::http {

// The four request-target forms of RFC 9112 §3.2.
enum class TargetForm { absolute, authority, origin, asterisk };

// host [":" port] as it appears in a request-target or a Host field value, and its strict
// syntax: the policy's, which `sandgate decide` shares (policy/host.hpp).
using policy::Authority;
using policy::parse_authority;

// Whether two authorities name the same host and port: hosts compared case-insensitively and
// character for character otherwise (no normalisation), a missing port meaning default_port.
bool same_authority(const Authority& a, const Authority& b, std::uint16_t default_port);

struct RequestTarget {
  TargetForm form = TargetForm::origin;
  Authority authority;              // absolute and authority forms
  std::string_view path_and_query;  // as sent; empty for authority form, "*" for asterisk
};

// Classifies and checks a request-target against its method (RFC 9112 §3.2):
//   bytes outside the URI character set, a '#' fragment, bad %-escapes  -> malformed_request
//   CONNECT with anything but host:port, a non-CONNECT authority form,
//   a scheme other than http, userinfo, "*" without OPTIONS            -> unsupported_target
// The path and query may also hold "[]{}|^`": WHATWG-URL clients (browsers, Node's fetch) send
// those unescaped. '\', '"', '<', '>', spaces, controls and non-ASCII bytes are refused.
Result<RequestTarget> parse_request_target(std::string_view target, bool is_connect,
                                           bool is_options);

}  // namespace sandgate::http
