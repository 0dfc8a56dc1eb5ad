#pragma once

// What every worker shares for TLS interception: the CA's leaf cache (the client leg) and the
// TLS client context of the upstream leg. Built once at startup from [interception]; the
// daemon has none when interception is off.

#include <boost/asio/ssl/context.hpp>
#include <memory>
#include <string>

#include "config/config.hpp"
#include "tls/authority.hpp"
#include "tls/leaf_cache.hpp"

namespace sandgate::proxy {

struct Interception {
  std::shared_ptr<const tls::Authority> authority;
  std::unique_ptr<tls::LeafCache> leaves;
  // Verifies every upstream against the system roots plus [interception] upstream_ca_file;
  // each connection checks the certificate names the host it dialled (SSL_set1_host, or
  // the IP address for a literal). Offers only http/1.1 by ALPN.
  boost::asio::ssl::context upstream{boost::asio::ssl::context::tls_client};
};

// Loads the CA and the extra roots. Throws std::runtime_error naming the file when a file is
// missing, unreadable, too readable (the key) or not what it should be.
std::shared_ptr<Interception> make_interception(const config::Interception& c);

}  // namespace sandgate::proxy
