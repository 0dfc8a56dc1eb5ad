#pragma once

// SHA-256 for the daemon's hot paths (each audit line's chain, each request signed again or
// authenticated). OpenSSL 3's one-shot SHA256() looks its algorithm up on every call and makes
// and frees a context, which costs as much as hashing a short text: here the algorithm is
// fetched once and each thread keeps a context, reset by every init.

#include <array>
#include <string_view>

namespace sandgate {

std::array<unsigned char, 32> sha256_digest(std::string_view bytes);

}  // namespace sandgate
