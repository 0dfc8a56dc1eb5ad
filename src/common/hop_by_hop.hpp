#pragma once

// The header fields a proxy never passes on as they came, by name (any case): RFC 9110 section
// 7.6.1's hop-by-hop fields, the proxy's own (Proxy-Authorization, Proxy-Connection), and
// Expect, which the proxy answers itself. sandgate's HTTP/1.1 forwarding strips them by
// Beast's field enum (http::strip_hop_by_hop); this is the same list for code that has only a
// name: what a re-signed request leaves unsigned, what a credential may not be injected as.

#include <algorithm>
#include <iterator>
#include <string_view>

#include "common/ascii.hpp"

namespace sandgate {

inline bool hop_by_hop_field(std::string_view name) {
  constexpr std::string_view kNames[] = {
      "connection",       "expect", "keep-alive", "proxy-authorization",
      "proxy-connection", "te",     "trailer",    "transfer-encoding",
      "upgrade"};
  return std::any_of(std::begin(kNames), std::end(kNames),
                     [&](std::string_view known) { return iequals_ascii(known, name); });
}

}  // namespace sandgate
