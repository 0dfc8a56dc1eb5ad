// The providers of AWS credentials. Each yields one token holding the key id, the secret and
// the session token (sigv4::pack_credentials), which requests get by being signed again
// (docs/credentials.md, "AWS").
//
// provider = "aws_static": a key pair (and, for temporary credentials, a session token) in
// files, read again when a file changes.
#include "secrets/provider.hpp"
#include "secrets/secret_file.hpp"
#include "secrets/sigv4.hpp"

namespace sandgate::secrets {

namespace {

// How often a request also checks whether the files changed (stats, on the store's thread).
constexpr auto kRecheck = std::chrono::seconds(2);

class AwsStaticProvider final : public Provider {
 public:
  AwsStaticProvider(const CredentialSpec& spec, ProviderContext context)
      : spec_(spec), context_(std::move(context)) {}

  boost::asio::awaitable<FetchResult> fetch(Scope) override {
    // A missing, unreadable or malformed file cannot mend itself without the operator.
    SecretFile key_id = read_secret_file(spec_.access_key_id_file, "access key id file");
    if (!key_id.ok()) co_return fetch_failure(false, key_id.error);
    SecretFile secret = read_secret_file(spec_.secret_access_key_file, "secret access key file");
    if (!secret.ok()) co_return fetch_failure(false, secret.error);
    SecretFile session;
    if (!spec_.session_token_file.empty()) {
      session = read_secret_file(spec_.session_token_file, "session token file");
      if (!session.ok()) co_return fetch_failure(false, session.error);
    }
    std::string packed = sigv4::pack_credentials(
        {key_id.content.view(), secret.content.view(), session.content.view()});
    FetchResult out;
    if (!sigv4::unpack_credentials(packed)) {
      out = fetch_failure(false, "credential " + spec_.name +
                                     ": a key file holds a space, a line break or a byte that is "
                                     "not ASCII (each file holds its value on one line)");
    } else {
      Fetched fetched;
      fetched.value = SecretBytes(packed);
      fetched.refresh_at = context_.clock() + kRecheck;
      out.token = std::move(fetched);
    }
    cleanse(packed);
    co_return out;
  }

 private:
  CredentialSpec spec_;
  ProviderContext context_;
};

}  // namespace

std::shared_ptr<Provider> make_aws_static_provider(const CredentialSpec& spec,
                                                   ProviderContext context) {
  return std::make_shared<AwsStaticProvider>(spec, std::move(context));
}

}  // namespace sandgate::secrets
