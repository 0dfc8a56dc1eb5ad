#pragma once

// Which credential a request gets, and how it is written into the request. Pure: compiled
// from config, matched per request by the proxy's credential filter, table-tested.

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/sharded_map.hpp"
#include "policy/host.hpp"
#include "policy/host_pattern.hpp"
#include "secrets/scope.hpp"

namespace sandgate::secrets {

enum class InjectAs {
  bearer,  // Authorization: Bearer TOKEN
  basic,   // Authorization: Basic base64(USER:TOKEN)
  header,  // HEADER: FORMAT with "{token}" replaced
  // The request, signed by the client with the sandbox's placeholder keys (AWS Signature
  // Version 4), signed again with the credential's real keys (an aws_* credential).
  aws_sigv4,
};

// One [[profiles.P.inject]] or [[sandboxes.S.inject]] table.
struct InjectRule {
  std::vector<policy::HostPattern> hosts;  // at least one
  // Canonical path prefixes (policy::canonicalize_path), matched on segment boundaries: "/acme"
  // matches "/acme" and "/acme/x" but not "/acmex"; "/acme/" matches "/acme/" and below.
  // Empty: any path.
  std::vector<std::string> path_prefixes;
  std::string credential;  // a [credentials.NAME]
  InjectAs as = InjectAs::bearer;
  std::string user;                // basic
  std::string header;              // header: the field name
  std::string format = "{token}";  // header: contains "{token}" exactly once
  Scope scope;                     // github_app: repositories, permissions (else empty)
  // An AWS role assumed for each sandbox on its own (aws_assume_role, aws_web_identity without
  // a role_session_name): the token is asked for with the request's sandbox in its scope.
  bool session_per_sandbox = false;
  std::string origin;  // "profiles.default.inject[0]", for logs and audit lines
  bool operator==(const InjectRule&) const = default;
};

// The scope a request from `sandbox` asks `rule`'s credential for.
Scope scope_for(const InjectRule& rule, std::string_view sandbox);

// The header a request gets: the proxy removes every field named `name` the client sent,
// then adds this one. `secret_forms` are what of the value reveals the token (the token
// itself and, for Basic, the base64 text, padded and not, standard and URL-safe): what the
// response redactor looks for (it also finds each form escaped, see Redactor).
struct Injection {
  std::string name;
  std::string value;
  std::vector<std::string> secret_forms;
};

// Builds the header for `token` (basic: base64 of "user:token"). aws_sigv4: no header (the
// request is signed again instead); the secret forms are the key id, the secret and the
// session token of the packed credentials (sigv4::pack_credentials).
Injection apply(const InjectRule& rule, std::string_view token);

// The compiled rules of one sandbox: its own first, then its profile's. Immutable.
class InjectionRules {
 public:
  // `ports`: the sandbox's ports, which a host pattern without a port stands for (as in the
  // policy's rules).
  InjectionRules(std::vector<InjectRule> rules, std::vector<std::uint16_t> ports);

  // The first rule whose host pattern matches host:port and whose path prefix (if any)
  // matches the canonical form of `target` (path and query as sent); nullptr when none. A
  // target that canonicalises ambiguously matches no rule with path prefixes.
  const InjectRule* match(const policy::Host& host, std::uint16_t port,
                          std::string_view target) const;
  // Whether some rule binds `credential` to host:port (any path): a placeholder of that
  // credential on a request to such a host is replaced, elsewhere it is refused.
  bool binds(std::string_view credential, const policy::Host& host, std::uint16_t port) const;

  const std::vector<InjectRule>& rules() const { return rules_; }
  // The credentials the rules name, sorted, unique.
  const std::vector<std::string>& credentials() const { return credentials_; }
  bool empty() const { return rules_.empty(); }

 private:
  bool host_matches(const InjectRule& rule, const policy::Host& host, std::uint16_t port) const;

  std::vector<InjectRule> rules_;
  std::vector<std::uint16_t> ports_;  // sorted
  std::vector<std::string> credentials_;
};

// Every sandbox's rules, built once per config snapshot (Config::build_injection).
// Sandboxes that have no rules of their own and the same profile and ports share one
// compiled InjectionRules.
class InjectionTable {
 public:
  // The sandbox's rules; nullptr when it has none (or is unknown).
  const InjectionRules* for_sandbox(std::string_view id) const;
  // How many distinct compiled rule sets the sandboxes hold (tests; walks every sandbox).
  std::size_t distinct_rule_sets() const;

  // Building (config does it). A copy shares every entry with the table it was copied from,
  // so a reload that adds or removes one sandbox copies only what it changes.
  void add(std::string id, std::shared_ptr<const InjectionRules> rules);
  void remove(std::string_view id);
  // The compiled rules that sandboxes of `profile` with `ports` and no rules of their own
  // share: compiled from `inherited` the first time, then the same object.
  std::shared_ptr<const InjectionRules> profile_rules(const std::string& profile,
                                                      const std::vector<std::uint16_t>& ports,
                                                      const std::vector<InjectRule>& inherited);

 private:
  common::ShardedStringMap<std::shared_ptr<const InjectionRules>> sandboxes_;
  std::map<std::pair<std::string, std::vector<std::uint16_t>>,
           std::shared_ptr<const InjectionRules>>
      profiles_;  // per profile and port list seen since the last whole build
};

// Whether canonical `path` starts with `prefix` on a segment boundary (see path_prefixes).
bool path_prefix_matches(std::string_view prefix, std::string_view path);

}  // namespace sandgate::secrets
