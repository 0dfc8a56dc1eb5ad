#pragma once

// What every worker shares for TLS interception: the CA's leaf cache (the client leg) and the
// TLS client context of the upstream leg. Built once at startup from [interception]; the
// daemon has none when interception is off.

#include <openssl/ssl.h>

#include <boost/asio/ssl/context.hpp>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "config/config.hpp"
#include "tls/authority.hpp"
#include "tls/leaf_cache.hpp"
#include "tls/mint_budget.hpp"

namespace sandgate::proxy {

inline constexpr std::size_t kSinkLeaves = 64;

struct Interception {
  std::shared_ptr<const tls::Authority> authority;
  std::unique_ptr<tls::LeafCache> leaves;
  // The leaves of names refused at the DNS sink (their streams are only answered with the
  // refusal): a small cache of their own, so that a sandbox that makes sandgate mint for
  // names without end never evicts the leaves other sandboxes' intercepted hosts use.
  std::unique_ptr<tls::LeafCache> sink_leaves;
  // What each sandbox may still have minted ([interception] max_leaf_mints_per_minute).
  std::unique_ptr<tls::MintBudget> mint_budget;
  // Verifies every upstream against the system roots plus [interception] upstream_ca_file;
  // each connection checks the certificate names the host it dialled (SSL_set1_host, or
  // the IP address for a literal). Offers only http/1.1 by ALPN.
  boost::asio::ssl::context upstream{boost::asio::ssl::context::tls_client};

  // Upstream TLS sessions by "host:port", so that a new intercepted connection resumes
  // sandgate's last session with that destination instead of a full handshake (the
  // certificate was verified for that name when the session was made). Bounded; thread-safe.
  void remember_session(const std::string& key, SSL_SESSION* session);  // takes ownership
  // The session to offer for `key` (a new reference the caller frees), or null.
  SSL_SESSION* session_for(const std::string& key);

 private:
  struct SessionFree {
    void operator()(SSL_SESSION* s) const;
  };
  std::mutex sessions_mutex_;
  std::unordered_map<std::string, std::unique_ptr<SSL_SESSION, SessionFree>> sessions_;
};

// The SSL ex data slot of an upstream connection's session key (a std::string*).
int upstream_session_index();

// Loads the CA and the extra roots. Throws std::runtime_error naming the file when a file is
// missing, unreadable, too readable (the key) or not what it should be.
std::shared_ptr<Interception> make_interception(const config::Interception& c);

}  // namespace sandgate::proxy
