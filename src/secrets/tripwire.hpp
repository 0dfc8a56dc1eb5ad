#pragma once

// The placeholder tripwire: whether the credential placeholders a request carries may go
// where it goes. A placeholder is replaced only on a request its credential is bound to; one
// seen anywhere else is an exfiltration attempt (an agent talked into sending its "token"
// somewhere). Pure: the proxy's credential filter asks, policy's reason names the refusal.

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "policy/host.hpp"
#include "secrets/injection.hpp"
#include "secrets/placeholder.hpp"

namespace sandgate::secrets {

struct PlaceholderCheck {
  bool found = false;      // some placeholder-shaped text was seen
  bool allowed = true;     // every one found may go with this request
  std::string credential;  // when refused: whose placeholder it was ("" when unknown)
  std::string why;         // when refused: for the audit line's message
};

// Looks at `texts` (the request's header values and its target) of a request by `sandbox`
// to host:port. Allowed only when every placeholder found is a known one of this sandbox,
// the request is inside a stream sandgate intercepted, and `rules` (the sandbox's inject
// rules; may be null) bind its credential to host:port.
PlaceholderCheck check_placeholders(const PlaceholderIndex& index, const InjectionRules* rules,
                                    std::string_view sandbox, const policy::Host& host,
                                    std::uint16_t port, bool intercepted,
                                    std::span<const std::string_view> texts);

// The same tripwire over a request body as it streams to its destination, wherever chunk
// boundaries cut a placeholder. The caller keeps the bytes contiguous: each feed() gets the
// bytes the last one held back, then the new ones; the bytes it returns as decided may go on,
// the rest (at most kHoldBack, and only from where the end could begin a placeholder) must
// come again in front of the next chunk. So no byte of a placeholder that is refused ever
// leaves, and memory is the caller's buffer plus kHoldBack.
// Costs one search for "sgph_" per byte. Sees the bytes as sent: a compressed or encoded body
// hides a placeholder from it (a tripwire, not a filter). Everything it points to (index,
// rules, host) outlives it. One per request body; not thread-safe.
// Used by the HTTP/1.1 relay (proxy/http_forward.cpp, relay_message) and the HTTP/2 one
// (proxy/intercept_h2.cpp, ScannedBody).
class BodyTripwire {
 public:
  // Enough for a whole placeholder and the byte after it, which says it ends there.
  static constexpr std::size_t kHoldBack = kPlaceholderLength;

  BodyTripwire(const PlaceholderIndex& index, const InjectionRules* rules, std::string_view sandbox,
               const policy::Host& host, std::uint16_t port, bool intercepted);

  // How many bytes from the start of `data` are decided and may go on; `last`: the body ends
  // with `data` (all of it is decided). Once refused(), nothing of `data` may go (0) and the
  // body must not be finished: the request is to be stopped.
  std::size_t feed(std::string_view data, bool last);
  // The same over the request's trailers (names and values), which leave after its body;
  // false (and refused()) when one carries a placeholder where it may not go.
  bool pass_trailers(std::span<const std::string_view> texts);

  bool refused() const { return !check_.allowed; }
  bool found() const { return check_.found; }
  // The refusal (credential, why) once refused().
  const PlaceholderCheck& check() const { return check_; }

 private:
  const PlaceholderIndex* index_;
  const InjectionRules* rules_;
  std::string_view sandbox_;
  const policy::Host* host_;
  std::uint16_t port_;
  bool intercepted_;
  PlaceholderCheck check_;
};

}  // namespace sandgate::secrets
