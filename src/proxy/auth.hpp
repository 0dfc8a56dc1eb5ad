#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "proxy/runtime.hpp"
#include "telemetry/metrics.hpp"

namespace sandgate::proxy {

// What a Proxy-Authorization value proves. `sandbox`: the authenticated id (ok), the bound
// one (identity_changed), or the known id whose token was wrong (wrong_token: named in the
// audit line, so an operator sees which sandbox's token is stale); empty otherwise, so an
// id no sandbox has (possibly a token typed in the wrong place) is never logged or counted.
struct AuthResult {
  telemetry::AuthOutcome outcome = telemetry::AuthOutcome::no_credentials;
  std::string sandbox;
  bool ok() const { return outcome == telemetry::AuthOutcome::ok; }
};

// Judges a Proxy-Authorization value, "Basic base64(SANDBOX_ID:TOKEN)", against the
// snapshot's sandboxes, on a connection already bound to `bound` ("" if none): the one place
// where a request's identity is decided. No field (an empty value) is the challenge
// (no_credentials); anything that is not Basic with base64 of "ID:TOKEN" is malformed; then
// unknown_sandbox_id, wrong_token, and identity_changed for a valid identity other than
// `bound`. Token comparison is constant time (digests compared with CRYPTO_memcmp).
// With `memo`, the value a connection last proved its identity with is remembered, and the
// same value on the same connection is then accepted without being decoded and hashed again
// for as long as the bound sandbox's token digest is the one it was checked against (a reload
// that changes the token checks it afresh).
class AuthMemo;
AuthResult authenticate(const Snapshot& snap, std::string_view header_value,
                        std::string_view bound = {}, AuthMemo* memo = nullptr);

// What a 407 tells the client about its credentials (docs/errors.md, "Proxy authentication
// outcomes"): the body's `reason` and `message`. A client with no identity yet must not learn
// whether a sandbox id exists, so unknown_sandbox_id and wrong_token are the same
// `invalid_credentials` to it; the audit line and sandgate_proxy_auth_total keep them apart.
// identity_changed is told as such: it is answered only to credentials that are valid, on a
// connection already bound to a sandbox of its own.
struct AuthRefusal {
  std::string_view reason;
  std::string_view message;
};
AuthRefusal auth_refusal(telemetry::AuthOutcome outcome);

// The last accepted Proxy-Authorization value of one connection; wiped when replaced or dropped.
class AuthMemo {
 public:
  AuthMemo() = default;
  AuthMemo(const AuthMemo&) = delete;
  AuthMemo& operator=(const AuthMemo&) = delete;
  ~AuthMemo();

 private:
  friend AuthResult authenticate(const Snapshot&, std::string_view, std::string_view, AuthMemo*);
  void remember(std::string_view value, const std::string& digest);
  bool holds(std::string_view value, const std::string& digest) const;

  struct Held {
    std::string value;
    std::string digest;
  };
  std::unique_ptr<Held> held_;  // on the heap, and only once a value was accepted
};

}  // namespace sandgate::proxy
