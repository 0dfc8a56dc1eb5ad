#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "proxy/runtime.hpp"

namespace sandgate::proxy {

// Checks a Proxy-Authorization value, "Basic base64(SANDBOX_ID:TOKEN)", against the
// snapshot's sandboxes. Returns the sandbox id, or nullopt for anything missing, malformed,
// unknown or wrong. Token comparison is constant time (digests compared with CRYPTO_memcmp).
std::optional<std::string> authenticate(const Snapshot& snap, std::string_view header_value);

}  // namespace sandgate::proxy
