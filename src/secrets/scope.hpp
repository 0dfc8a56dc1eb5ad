#pragma once

#include <map>
#include <string>
#include <vector>

namespace sandgate::secrets {

// GitHub App permissions: permission name -> "read", "write" or "admin". Sorted, so that two
// equal sets compare and print equal.
using Permissions = std::map<std::string, std::string, std::less<>>;

// What one token is minted for. Tokens are cached per (credential, Scope): two sandboxes
// whose rules ask for the same scope share a token, different scopes never do.
// `repositories` and `permissions` are for github_app credentials (down-scoping an
// installation token); `oauth_scopes` for oauth2_client_credentials; `sandbox` for AWS roles
// assumed per sandbox (its role session is named after it, see InjectRule::session_per_sandbox).
// Empty means "what the credential's own configuration says".
struct Scope {
  std::vector<std::string> repositories;  // "owner/name", lowercase, sorted, unique
  Permissions permissions;
  std::vector<std::string> oauth_scopes;  // sorted, unique
  std::string sandbox;

  // Sorts and de-duplicates the lists (repositories lowercased): call once after filling.
  void normalize();
  // A canonical string: equal for equal (normalised) scopes, different otherwise (every item
  // is length-prefixed, so no choice of names can make two scopes collide).
  std::string key() const;
  bool empty() const {
    return repositories.empty() && permissions.empty() && oauth_scopes.empty() && sandbox.empty();
  }
  bool operator==(const Scope&) const = default;
};

}  // namespace sandgate::secrets
