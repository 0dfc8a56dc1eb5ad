#pragma once

// The one HTTPS exchange the token providers need: a request, a bounded response, a deadline.
// Plain HTTP too, for the AWS instance and container credential endpoints only (IMDS and the
// ECS agent listen on link-local addresses without TLS). Runs on the credential store's
// io_context. The host's addresses come from the store's
// dns::Resolver (c-ares, on that same io_context), never from getaddrinfo: Asio's resolver runs
// every lookup on one hidden thread, so a token endpoint whose name never answers would hold up
// every other credential's fetch behind it (THREATS 35). TLS: the system's roots plus a
// credential's ca_file, peer verification and the host name checked, TLS 1.2 or later.

#include <boost/asio/awaitable.hpp>
#include <boost/asio/ssl/context.hpp>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace sandgate::dns {
class Resolver;
}

namespace sandgate::secrets {

struct HttpsRequest {
  std::string method = "POST";
  std::string url;  // https://host[:port]/path, or http:// (see https_exchange)
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
};

struct HttpsResponse {
  unsigned status = 0;
  std::string body;
};

// A response, or why there was none (`error`: connect, TLS, timeout, a response too large or
// malformed). A transport failure is always worth retrying later.
struct HttpsResult {
  std::optional<HttpsResponse> response;
  std::string error;
};

// A client context that verifies against the system roots and `ca_file` (may be empty).
// Throws std::runtime_error naming the file when it cannot be loaded.
std::shared_ptr<boost::asio::ssl::context> make_client_context(const std::string& ca_file);

// One exchange that is over by `deadline`, all of it: resolve, connect, handshake, write, read.
// An https:// URL is fetched over TLS with `ctx`; an http:// URL in the clear, and only when
// `ctx` is null: a provider that holds a TLS context (every one whose endpoint must be HTTPS)
// is refused an http:// URL even if one reached it.
// The URL's host is resolved by `resolver`, which must run on the executor this coroutine
// runs on (the store's); a lookup that outlasts the deadline is abandoned (other lookups and
// exchanges go on). An IP literal needs no lookup, and `localhost` and names below it are the
// loopback addresses 127.0.0.1 and ::1 (RFC 6761), as /etc/hosts has them; /etc/hosts is not
// read otherwise. A null `resolver`: any other name fails. The addresses are tried in order
// until one connects. The response body is limited to `max_body` bytes. The connection is
// closed afterwards.
boost::asio::awaitable<HttpsResult> https_exchange(std::shared_ptr<boost::asio::ssl::context> ctx,
                                                   HttpsRequest request, dns::Resolver* resolver,
                                                   std::chrono::steady_clock::time_point deadline,
                                                   std::size_t max_body);

// A short, single-line excerpt of a response body for an error message: at most `max` bytes,
// control characters replaced, each of `secrets` (tokens, the JWT) replaced by '*'s.
std::string excerpt(std::string_view body, const std::vector<std::string_view>& secrets,
                    std::size_t max = 200);

}  // namespace sandgate::secrets
