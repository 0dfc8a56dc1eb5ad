#include "secrets/spec.hpp"

namespace sandgate::secrets {

std::string_view kind_name(ProviderKind kind) {
  switch (kind) {
    case ProviderKind::static_file:
      return "static";
    case ProviderKind::exec:
      return "exec";
    case ProviderKind::github_app:
      return "github_app";
    case ProviderKind::oauth2_client_credentials:
      return "oauth2_client_credentials";
    case ProviderKind::aws_static:
      return "aws_static";
    case ProviderKind::aws_secrets_manager:
      return "aws_secrets_manager";
    case ProviderKind::oauth2_jwt_bearer:
      return "oauth2_jwt_bearer";
    case ProviderKind::vault:
      return "vault";
    case ProviderKind::aws_assume_role:
      return "aws_assume_role";
    case ProviderKind::aws_web_identity:
      return "aws_web_identity";
    case ProviderKind::aws_instance:
      return "aws_instance";
    case ProviderKind::aws_container:
      return "aws_container";
  }
  return "unknown";
}

std::vector<std::string> CredentialSpec::secret_files() const {
  switch (kind) {
    case ProviderKind::static_file:
      return {file};
    case ProviderKind::github_app:
      return {private_key_file};
    case ProviderKind::oauth2_client_credentials:
      return {client_secret_file};
    case ProviderKind::oauth2_jwt_bearer:
      return {key_file};
    case ProviderKind::vault:
      if (auth == "approle") return {secret_id_file};
      if (auth == "kubernetes") return {jwt_file};
      return {token_file};
    case ProviderKind::aws_web_identity:
      return {web_identity_token_file};
    case ProviderKind::aws_container:
      if (authorization_token_file.empty()) return {};
      return {authorization_token_file};
    case ProviderKind::aws_static: {
      std::vector<std::string> files = {access_key_id_file, secret_access_key_file};
      if (!session_token_file.empty()) files.push_back(session_token_file);
      return files;
    }
    case ProviderKind::exec:
    case ProviderKind::aws_instance:
    case ProviderKind::aws_assume_role:      // signs with its aws_credential's keys,
    case ProviderKind::aws_secrets_manager:  // which that credential's own files hold
      break;
  }
  return {};
}

}  // namespace sandgate::secrets
