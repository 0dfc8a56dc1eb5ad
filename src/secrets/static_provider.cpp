// provider = "static": a token in a file, read again when the file changes.
#include "secrets/provider.hpp"
#include "secrets/secret_file.hpp"

namespace sandgate::secrets {

namespace {

// How often a request also checks whether the file changed (a stat, on the store's thread).
constexpr auto kRecheck = std::chrono::seconds(2);

class StaticProvider final : public Provider {
 public:
  StaticProvider(const CredentialSpec& spec, ProviderContext context)
      : path_(spec.file), context_(std::move(context)) {}

  boost::asio::awaitable<FetchResult> fetch(Scope) override {
    SecretFile file = read_secret_file(path_, "token file");
    FetchResult out;
    if (!file.ok()) {
      // A missing or unreadable file cannot mend itself without the operator.
      out.error = {false, file.error};
      co_return out;
    }
    Fetched fetched;
    fetched.value = std::move(file.content);
    fetched.refresh_at = context_.clock() + kRecheck;
    out.token = std::move(fetched);
    co_return out;
  }

 private:
  std::string path_;
  ProviderContext context_;
};

}  // namespace

std::shared_ptr<Provider> make_static_provider(const CredentialSpec& spec,
                                               ProviderContext context) {
  return std::make_shared<StaticProvider>(spec, std::move(context));
}

}  // namespace sandgate::secrets
