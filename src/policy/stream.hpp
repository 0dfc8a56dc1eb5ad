#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "policy/host.hpp"
#include "policy/ip_address.hpp"
#include "policy/policy.hpp"

namespace sandgate::policy {

// What a stream's first bytes were, as the proxy's one classifier read them.
enum class Opening {
  silent,         // none yet: a CONNECT tunnel before its bytes, or a transparent client that
                  // sent nothing within the peek timeout (a server-first protocol)
  tls,            // a whole ClientHello (StreamFacts::sni when it named a host)
  tls_malformed,  // TLS framing, but no valid ClientHello
  http,           // an HTTP/1 request line
  proxy_request,  // a request meant for a proxy (CONNECT, absolute form)
  other,          // another protocol (ssh, a binary protocol)
  undecidable,    // still none of these past the classifier's bound
};

// Everything known about a stream when it opens: an explicit CONNECT (mode connect), or a
// connection the launcher's rules redirected (mode tcp; tls once its opening is a ClientHello).
struct StreamFacts {
  EntryMode mode = EntryMode::tcp;
  const std::string* sandbox = nullptr;  // null: the source is no sandbox's (transparent)
  Opening opening = Opening::silent;
  const Host* authority = nullptr;   // connect: the host the CONNECT asked for
  const std::string* sni = nullptr;  // the ClientHello's server name, when it had one
  // transparent: the names this sandbox's own DNS answers gave for `original`, newest first.
  std::span<const std::string> dns_names;
  IpAddress original;  // transparent: the address the sandbox dialled (recorded, never dialled)
  std::uint16_t port = 0;
  // transparent: `original` is the sink address, the one sandgate's DNS gives the names it
  // refuses (docs/dns.md): the sandbox dialled a name it may not reach. Its `dns_names` are
  // the names refused so.
  bool sink = false;
  // An operator allowed this held destination (Decision::held): allowed_by_operator.
  bool granted = false;
};

// What to do with the stream.
enum class StreamAction {
  refuse,      // the decision refused it
  tunnel,      // dial `dial` and relay the bytes
  serve_http,  // HTTP/1 requests, each decided and forwarded on its own
  // dial is inspected (Policy::inspects): terminate the client's TLS with a leaf for `dial`
  // and serve the requests inside, each decided (decide_request with `intercepted` = dial).
  // The client's first bytes must be a ClientHello; nothing is spliced.
  intercept,
};

struct StreamVerdict {
  Decision decision;
  StreamAction action = StreamAction::refuse;
  EntryMode mode = EntryMode::tcp;  // what the stream is decided and logged as
  Host dial;          // tunnel: the host to dial; refuse: the host refused (for the suggestion)
  std::string shown;  // the destination as the audit line shows it
  // tunnel: the client's first bytes are still to come and must pass the tunnel's gate (SNI,
  // Host, nested proxy requests) before any of them is relayed.
  bool gated = false;
  // The stream came to the sink (StreamFacts::sink): nothing is ever dialled. serve_http and
  // intercept (a leaf for the SNI) only answer each request with its refusal
  // (RequestFacts::sunk); the rest is refused as the stream's protocol refuses.
  bool sunk = false;
};

// The one decision over a stream, for every entry mode. Pure: a table of facts in, a verdict
// out. A transparent stream is decided on the name its bytes carry (the SNI), else on the
// names the sandbox's DNS answers gave for the address it dialled (the first one allowed on
// this port wins), else on the address itself (an allow_cidrs range may open it); with none
// of those, `unnamed_destination`, unless the address carries a stronger reason (metadata, a
// loop, an unrecognised protocol on 80/443).
//
// An allowed stream to an inspected host is intercepted instead of tunnelled: a CONNECT to
// it, a transparent ClientHello naming it, and a transparent stream decided on a
// DNS-remembered name that is inspected when it is TLS without SNI or has sent nothing yet
// (a client that speaks first on another port); other bytes to such a name are refused
// (unrecognized_protocol), since its requests could not be decided, except on 80 and 443
// where an `opaque` entry naming that host and port lets them through spliced.
//
// A stream to the sink is never dialled, whatever names it carries: HTTP is served so that
// each request gets its refusal (RequestFacts::sunk), TLS naming a host is intercepted for
// the same (the client reads a 403, git its ERR line, rather than a reset), anything else is
// refused on the first name the sandbox's DNS refused for it (or the address).
StreamVerdict decide_stream(const Policy& policy, const StreamFacts& facts);

}  // namespace sandgate::policy
