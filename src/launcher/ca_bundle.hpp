#pragma once

// The CA bundle a sandbox's programs verify TLS with: the system roots plus the certificates
// the config adds (sandgate's interception CA, launcher.ca_file). Pure text work, no OpenSSL:
// the launcher only copies PEM blocks, the programs inside parse them.

#include <string>
#include <string_view>
#include <vector>

namespace sandgate::launcher {

// The "-----BEGIN CERTIFICATE-----" ... "-----END CERTIFICATE-----" blocks of `pem`, in
// order, each exactly as written (without what lies between blocks). A block without its END
// line is not a certificate and is left out.
std::vector<std::string_view> certificate_blocks(std::string_view pem);

// `system_roots` unchanged, then every certificate block of each of `extras` that is not in the
// bundle yet (the same base64 body, whatever the line breaks), each on lines of its own. So a
// CA named twice (interception.ca_cert and launcher.ca_file), or already among the system's
// roots, is in the bundle once.
std::string make_ca_bundle(std::string_view system_roots, const std::vector<std::string>& extras);

}  // namespace sandgate::launcher
