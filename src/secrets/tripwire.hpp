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

}  // namespace sandgate::secrets
