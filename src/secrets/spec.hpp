#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "secrets/scope.hpp"

namespace sandgate::secrets {

enum class ProviderKind {
  static_file,                // "static"
  exec,                       // "exec"
  github_app,                 // "github_app"
  oauth2_client_credentials,  // "oauth2_client_credentials"
  aws_static,                 // "aws_static": an AWS key pair (and session token) in files
  aws_secrets_manager,        // "aws_secrets_manager": a secret read with AWS keys
  oauth2_jwt_bearer,          // "oauth2_jwt_bearer": RFC 7523, a signed assertion exchanged
  vault,                      // "vault": a HashiCorp Vault secret
  aws_assume_role,            // "aws_assume_role": STS AssumeRole with an aws_static's keys
  aws_web_identity,           // "aws_web_identity": STS AssumeRoleWithWebIdentity (EKS)
  aws_instance,               // "aws_instance": the EC2 instance's role, from IMDSv2
  aws_container,              // "aws_container": the ECS task's or EKS pod's role
};

// Whether `kind` yields AWS credentials, which requests get by SigV4 re-signing
// (InjectAs::aws_sigv4) rather than in a header.
inline bool is_aws(ProviderKind kind) {
  return kind == ProviderKind::aws_static || kind == ProviderKind::aws_assume_role ||
         kind == ProviderKind::aws_web_identity || kind == ProviderKind::aws_instance ||
         kind == ProviderKind::aws_container;
}

// Whether `kind` fetches over HTTPS (and so takes ca_file, [interception] upstream_ca_file by
// default): all but the file and helper providers and IMDS, which is plain HTTP on a
// link-local address. aws_container may be either: HTTPS when its endpoint_url says so.
// Every provider but aws_instance and aws_container refuses an http:// URL.
inline bool uses_https(ProviderKind kind) {
  return kind != ProviderKind::static_file && kind != ProviderKind::exec &&
         kind != ProviderKind::aws_static && kind != ProviderKind::aws_instance;
}

// An IAM role name (aws_instance's role_name, or the one IMDS lists): 1-64 letters, digits and
// _+=,.@- (IAM's rule), so it is safe in a URL path as it is.
inline bool valid_role_name(std::string_view name) {
  return !name.empty() && name.size() <= 64 &&
         name.find_first_not_of(
             "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstu"
             "vwxyz0123456789_+=,.@-") == std::string_view::npos;
}

// The config spelling ("static", ...), also the metrics label.
std::string_view kind_name(ProviderKind kind);

// One [credentials.NAME] table, validated by config. Holds paths, never a secret: the
// secrets stay in their files until a provider reads them. Equal specs mean the store keeps
// the credential's cached tokens across a reload.
struct CredentialSpec {
  std::string name;
  ProviderKind kind = ProviderKind::static_file;
  std::vector<std::string> env;  // variables sandgate-launch sets to the placeholder
  std::string ca_file;           // extra roots for the token endpoint (HTTPS providers)
  std::chrono::seconds refresh_before{600};
  std::chrono::milliseconds timeout{10'000};  // one fetch: the command, or the HTTPS exchange

  // static
  std::string file;
  // exec
  std::vector<std::string> command;  // argv; command[0] an absolute path
  std::chrono::seconds ttl{300};     // lifetime of a token printed without expires_at
  // github_app
  std::int64_t app_id = 0;
  std::string private_key_file;
  std::int64_t installation_id = 0;  // 0: look up installation_account
  std::string installation_account;
  std::string api_url = "https://api.github.com";
  Permissions permissions;  // requested when a rule asks for none
  // oauth2_client_credentials
  std::string token_url;
  std::string client_id;
  std::string client_secret_file;
  std::vector<std::string> scopes;
  std::string audience;
  // aws_static (the session token file is optional: a long-term key has none)
  std::string access_key_id_file;
  std::string secret_access_key_file;
  std::string session_token_file;
  // aws_secrets_manager and aws_assume_role: the credential whose keys sign their requests
  // (any AWS key source; the store gives its keys: ProviderContext::token_of)
  std::string aws_credential;
  // aws_secrets_manager: GetSecretValue of secret_id (a name or an ARN), at version_stage
  // (empty: AWSCURRENT), its JSON field json_field (empty: the whole SecretString), read again
  // every ttl
  std::string secret_id;
  std::string region;
  std::string json_field;
  std::string version_stage;
  std::string endpoint_url;  // empty: https://secretsmanager.REGION.amazonaws.com (STS:
                             // https://sts.amazonaws.com, or sts.REGION with a region);
                             // aws_instance: IMDS's base URL, empty: http://169.254.169.254;
                             // aws_container: the full URI of the credentials (required)
  // aws_assume_role (with aws_credential's keys) and aws_web_identity (with the OIDC token in
  // web_identity_token_file): temporary keys for role_arn, for `ttl`
  std::string role_arn;
  std::string role_session_name;  // empty: "sandgate-NAME"
  std::string web_identity_token_file;
  // aws_instance: the instance profile's role (empty: the one IMDS lists)
  std::string role_name;
  // aws_container: the Authorization header's value, read on every fetch (EKS Pod Identity's
  // AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE); empty: none sent
  std::string authorization_token_file;
  // oauth2_jwt_bearer (token_url, scopes and audience as for oauth2; token_url and issuer
  // default to the service-account key's token_uri and client_email)
  std::string key_file;  // a Google service-account JSON key, or a PEM RSA private key
  std::string issuer;
  std::string subject;
  // vault: log in (auth "token": the token in token_file; "approle": role_id and the secret
  // id in secret_id_file; "kubernetes": role and the service-account JWT in jwt_file, at
  // auth_mount), then GET /v1/{secret_path} and take `field` (of data.data for KV v2, else of
  // data); re-read every ttl, or, for a secret with a lease, renewed refresh_before the lease
  // ends (read again when Vault will not extend it in full); the Vault token is kept and renewed
  // the same way (src/secrets/vault_client.hpp)
  std::string address;
  std::string auth = "token";
  std::string token_file;
  std::string role_id;
  std::string secret_id_file;
  std::string role;
  std::string jwt_file;
  std::string auth_mount;  // empty: the method's name
  std::string vault_namespace;
  std::string secret_path;
  std::string field;

  // The files holding secrets this spec reads (the static file, the key, the client secret).
  std::vector<std::string> secret_files() const;
  bool operator==(const CredentialSpec&) const = default;
};

}  // namespace sandgate::secrets
