#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/beast/http/fields.hpp>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "common/errc.hpp"
#include "policy/host.hpp"
#include "policy/policy.hpp"
#include "secrets/aws_chunked.hpp"
#include "secrets/injection.hpp"
#include "secrets/token.hpp"

namespace sandgate::proxy {

struct Session;

// The whole request body, read before the request goes on, for a filter that must see all of
// it first (a signature over it). The wire keeps the bytes and sends them on as they were once
// the chain let the request go.
struct WholeBody {
  std::string_view bytes;  // valid while the request is
  // request_body_too_large: over the limit; malformed_request: the client broke it off or
  // framed it wrongly (the connection cannot go on after that).
  Errc error = Errc::ok;
};
class BodyReader {
 public:
  // Reads the rest of the body, at most `limit` bytes. Called at most once per request.
  virtual boost::asio::awaitable<WholeBody> read_whole(std::size_t limit) = 0;

 protected:
  ~BodyReader() = default;
};

// One request as every filter sees it, with no wire details: the HTTP/1.1 codec produces it
// today, the HTTP/2 codec of intercepted streams will produce the same.
struct ProxiedRequest {
  std::string_view method;
  std::string_view scheme;   // "http"; "https" once intercepted
  const policy::Host* host;  // the authority's host, normalised
  std::uint16_t port = 0;
  std::string_view path;                         // path and query
  boost::beast::http::fields* fields = nullptr;  // editable (credential injection)
  // The authority the request will name (Host, :authority) when it leaves, which a signature
  // over the request covers; and the wire's reader of the whole body (intercepted only).
  std::string_view authority;
  BodyReader* body = nullptr;
  bool connect_to_origin = false;  // a CONNECT where origin requests belong (transparent)
  // Intercepted: the name (and port) whose TLS sandgate terminated; null otherwise.
  const policy::Host* intercepted = nullptr;
  std::uint16_t intercepted_port = 0;
  // Set by the decision filter: what policy decided for this request (the rule that allowed
  // it, or an audit-mode rule that would have refused it).
  policy::Decision decision;
  // Set by the credential filter when it attached a credential: the rule, the token (held for
  // the request's lines, which name its fingerprint), and what of it the response must not
  // carry back to the sandbox (the Redactor's needles).
  const secrets::InjectRule* injected = nullptr;
  // Set by the credential filter once a rule matched, whether or not a token could be had:
  // the credential the request's lines name (credential.name, the 503's too).
  std::string_view credential;
  std::shared_ptr<const secrets::Token> token;
  std::vector<std::string> secret_forms;
  // Set by the credential filter for an AWS upload signed chunk by chunk: the body's chunks
  // are to be signed again as they pass (the wire's RequestBody takes it).
  std::unique_ptr<secrets::sigv4::ChunkResigner> resign_chunks;
};

// What a filter decided: go on to the next one, or stop the request: refused by policy
// (`denial`), or failed with a code of its own (`error`, e.g. no credential to attach).
struct FilterResult {
  bool next = true;
  policy::Decision denial;  // when !next and error is ok
  Errc error = Errc::ok;    // when !next: a failure that is not a policy refusal
  std::string message;      // for `error`: what the client is told (never a secret)
  bool retryable = true;    // for `error`: whether waiting can help (the body's `retryable`)
  // CREDENTIAL_UNAVAILABLE: the token endpoint's answer, for the audit line only
  // (secrets::TokenError::endpoint_status, endpoint_error).
  unsigned endpoint_status = 0;
  std::string endpoint_error{};
};

// What the whole chain decided: `decision` is the policy's (allowed, or the first refusal);
// an allowed request with decision.audit set would have been refused by an audit-mode rule.
// A request stopped by a failure has `error` set (and decision is the policy's allowance).
struct ChainResult {
  bool allowed = true;
  policy::Decision decision;
  Errc error = Errc::ok;
  std::string message;
  bool retryable = true;         // for `error`, when the code's own default is too coarse
  unsigned endpoint_status = 0;  // CREDENTIAL_UNAVAILABLE: as FilterResult's
  std::string endpoint_error{};
};

// One step of the chain every request goes through before it is forwarded (the decision;
// then method and path rules, credential injection). Stateless: one instance serves every
// worker. A filter may wait (a credential being fetched), on the session's worker.
class RequestFilter {
 public:
  virtual ~RequestFilter() = default;
  virtual boost::asio::awaitable<FilterResult> on_request(const Session& s,
                                                          ProxiedRequest& r) const = 0;
};

// The request filters, in order.
std::span<const RequestFilter* const> request_filters();

// Runs the chain; the first filter that refuses or fails ends it.
boost::asio::awaitable<ChainResult> filter_request(const Session& s, ProxiedRequest& r);

}  // namespace sandgate::proxy
