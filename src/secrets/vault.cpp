// provider = "vault": a secret read from HashiCorp Vault's HTTP API with a Vault token that is
// kept and renewed (VaultClient: auth "token", "approle" or "kubernetes"), X-Vault-Namespace
// sent when a namespace (Vault Enterprise) is set. GET /v1/PATH: KV v2 answers data.data, KV v1
// and the other engines data; `field` names the value.
//
// A lease_duration (a dynamic secret: database or cloud credentials) ends the token's life: it
// is fetched again before the lease ends (refresh_before), else after ttl. A renewable lease
// (renewable and a lease_id) is kept with the secret, per scope, and that next fetch first asks
// PUT /v1/sys/leases/renew for as long again as the read gave: granted in full, the same secret
// is served until the new end; refused (a 4xx: the lease is gone or not renewable) or granted
// for less (Vault capped it at the lease's max TTL, so it ends soon whatever is done), the path
// is read again for a new secret and lease. Vault unreachable or failing: the fetch fails,
// retryable, the lease is kept, and the store serves the secret it has until it expires.
#include <boost/json.hpp>
#include <map>

#include "secrets/vault_client.hpp"

namespace sandgate::secrets {

namespace {

namespace asio = boost::asio;
namespace json = boost::json;
using Deadline = std::chrono::steady_clock::time_point;
using detail::vault_field;
using detail::vault_flag;
using detail::vault_seconds;

// A renewable lease and the secret it is for, which a renewal serves again (Vault's renewal
// answer does not repeat it). SecretBytes: wiped when the lease is dropped or replaced.
struct Lease {
  std::string id;
  SecretBytes value;
  std::int64_t increment = 0;  // seconds: what the read gave, asked for again on renewal
  TimePoint expires_at;
  bool renewable = true;
};

class VaultProvider final : public Provider {
 public:
  VaultProvider(const CredentialSpec& spec, ProviderContext context)
      : spec_(spec), context_(std::move(context)), vault_(spec, context_) {}

  asio::awaitable<FetchResult> fetch(Scope scope) override {
    const Deadline deadline = std::chrono::steady_clock::now() + spec_.timeout;
    if (!vault_.setup_error().empty()) co_return fetch_failure(false, vault_.setup_error());
    // One fetch per scope at a time: this scope's lease is ours until we put it back.
    const std::string key = scope.key();
    if (const auto it = leases_.find(key); it != leases_.end()) {
      Lease lease = std::move(it->second);
      leases_.erase(it);
      if (lease.renewable && context_.clock() < lease.expires_at) {
        if (std::optional<FetchResult> renewed = co_await renew(lease, deadline)) {
          leases_.insert_or_assign(key, std::move(lease));
          co_return std::move(*renewed);
        }
      }
    }
    co_return co_await read(key, deadline);
  }

 private:
  void log(const std::string& line) const {
    if (context_.log) context_.log(line);
  }

  // The lease renewed: its secret with the new end; a failure worth retrying (keep the lease);
  // or nullopt when the lease is done with and the path is to be read again.
  asio::awaitable<std::optional<FetchResult>> renew(Lease& lease, Deadline deadline) {
    std::string method = "PUT";
    std::string api_path = "sys/leases/renew";
    std::string body =
        json::serialize(json::object{{"lease_id", lease.id}, {"increment", lease.increment}});
    detail::VaultReply reply =
        co_await vault_.call(std::move(method), api_path, std::move(body), deadline);
    if (!reply.ok()) {
      // No answer (Vault down, no Vault token to be had) or a 5xx: retry later.
      if (reply.status == 0 || reply.failure.error.retryable) co_return std::move(reply.failure);
      log(reply.failure.error.message + " (reading " + spec_.secret_path + " again)");
      co_return std::nullopt;
    }
    const std::int64_t seconds = vault_seconds(&reply.body, "lease_duration");
    if (seconds < lease.increment) {
      log(vault_.what(api_path) + ": renewed for " + std::to_string(seconds) + " s of the " +
          std::to_string(lease.increment) + " asked, its max TTL (reading " + spec_.secret_path +
          " again)");
      co_return std::nullopt;
    }
    lease.expires_at = context_.clock() + std::chrono::seconds(seconds);
    lease.renewable = vault_flag(&reply.body, "renewable");
    FetchResult out;
    out.token = Fetched{SecretBytes(lease.value.view()), lease.expires_at, std::nullopt};
    co_return out;
  }

  asio::awaitable<FetchResult> read(const std::string& key, Deadline deadline) {
    std::string method = "GET";
    std::string no_body;
    detail::VaultReply reply =
        co_await vault_.call(std::move(method), spec_.secret_path, std::move(no_body), deadline);
    if (!reply.ok()) co_return std::move(reply.failure);
    FetchResult out = secret_of(reply.body);
    const json::value* lease_id = vault_field(&reply.body, "lease_id");
    if (out.token && vault_flag(&reply.body, "renewable") && lease_id != nullptr &&
        lease_id->is_string() && !lease_id->as_string().empty() &&
        out.token->expires_at != TimePoint::max()) {
      leases_.insert_or_assign(
          key, Lease{std::string(lease_id->as_string()), SecretBytes(out.token->value.view()),
                     vault_seconds(&reply.body, "lease_duration"), out.token->expires_at, true});
    }
    co_return out;
  }

  // The field of a read's answer, until the lease's end or for ttl.
  FetchResult secret_of(const json::value& body) const {
    // KV v2 nests the secret's fields in data.data (beside data.metadata).
    const json::value* data = vault_field(&body, "data");
    const json::value* inner = vault_field(data, "data");
    if (vault_field(data, "metadata") != nullptr && inner != nullptr && inner->is_object()) {
      data = inner;
    }
    const json::value* value = vault_field(data, spec_.field);
    if (value == nullptr || !value->is_string() || value->as_string().empty()) {
      return fetch_failure(false, vault_.what(spec_.secret_path) +
                                      ": the secret has no string field " + spec_.field);
    }
    const TimePoint now = context_.clock();
    Fetched fetched;
    fetched.value =
        SecretBytes(std::string_view(value->as_string().data(), value->as_string().size()));
    if (const std::int64_t seconds = vault_seconds(&body, "lease_duration"); seconds > 0) {
      fetched.expires_at = now + std::chrono::seconds(seconds);
    } else {
      fetched.refresh_at = now + spec_.ttl;
    }
    FetchResult out;
    out.token = std::move(fetched);
    return out;
  }

  CredentialSpec spec_;
  ProviderContext context_;
  detail::VaultClient vault_;
  std::map<std::string, Lease> leases_;  // by Scope::key()
};

}  // namespace

std::shared_ptr<Provider> make_vault_provider(const CredentialSpec& spec, ProviderContext context) {
  return std::make_shared<VaultProvider>(spec, std::move(context));
}

}  // namespace sandgate::secrets
