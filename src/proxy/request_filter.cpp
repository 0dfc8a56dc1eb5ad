#include "proxy/request_filter.hpp"

#include <algorithm>
#include <array>
#include <optional>
#include <vector>

#include "common/ascii.hpp"
#include "http/request_head.hpp"
#include "policy/path.hpp"
#include "policy/request.hpp"
#include "policy/request_rules.hpp"
#include "proxy/session.hpp"
#include "secrets/encoding.hpp"
#include "secrets/sigv4.hpp"
#include "secrets/store.hpp"
#include "secrets/tripwire.hpp"

namespace sandgate::proxy {

namespace {

// The policy decision over the request (policy::decide_request) by `policy`. A plain function,
// so that what it builds stays out of the filter's coroutine frame.
policy::Decision decide(const policy::Policy& policy, const Session& s, const ProxiedRequest& r,
                        bool granted) {
  policy::RequestFacts facts;
  facts.granted = granted;
  facts.sandbox = s.sandbox;
  facts.host = r.host;
  facts.port = r.port;
  facts.method = r.method;
  facts.path = r.path;
  // The override fields' values, for the http rules (policy::request_methods). Nearly every
  // request has none, and then nothing is allocated.
  std::vector<std::string_view> overrides;
  if (r.fields != nullptr) {
    for (const std::string_view name : policy::kMethodOverrideFields) {
      const auto [begin, end] = r.fields->equal_range(name);
      for (auto it = begin; it != end; ++it) overrides.push_back(it->value());
    }
  }
  facts.method_overrides = overrides;
  facts.connect_to_origin = r.connect_to_origin;
  facts.intercepted = r.intercepted;
  facts.intercepted_port = r.intercepted_port;
  facts.sunk = s.sunk;
  return policy::decide_request(policy, facts);
}

// A held request's wait for its answer, and its decision after it. Apart from on_request,
// whose frame every request pays for: with these locals in it, it was over the 1020 bytes
// Asio's frame cache takes, so every request allocated it from the heap (bench/README.md).
boost::asio::awaitable<void> settle_held(const Session& s, ProxiedRequest& r) {
  // No rule names the host, and the sandbox asks first: decided again once allowed.
  HoldQuestion question{
      s.sandbox,          r.host->display(), r.port, std::string(r.scheme), std::string(r.method),
      std::string(r.path)};
  HoldEnd end = co_await settle_hold(s, std::move(question));
  if (end.refusal) {
    r.decision = std::move(*end.refusal);
    co_return;
  }
  // On the config now in force: a reload may have come while it waited.
  const auto now = s.deps.shared->current();
  r.decision = decide(*now->policy, s, r, end.granted);
  if (r.decision.held) r.decision = hold_refusal(HoldOutcome::expired);
}

class DecisionFilter final : public RequestFilter {
 public:
  boost::asio::awaitable<FilterResult> on_request(const Session& s,
                                                  ProxiedRequest& r) const override {
    r.decision = decide(*s.snap->policy, s, r, false);
    if (r.decision.held) co_await settle_held(s, r);
    FilterResult out;
    out.next = r.decision.allowed;
    if (!out.next) out.denial = r.decision;
    co_return out;
  }
};

// Whether the request's method, target (as sent, and as it will be forwarded) or any field
// name or value holds "sgph_": the placeholder tripwire's cheap first test, allocation-free,
// so that a request with no placeholder (all but an agent's token-hungry tools) costs one
// scan of its head.
bool may_carry_placeholder(const ProxiedRequest& r, std::string_view forwarded) {
  if (secrets::may_contain_placeholder(r.path) || secrets::may_contain_placeholder(forwarded) ||
      secrets::may_contain_placeholder(r.method)) {
    return true;
  }
  for (const auto& f : *r.fields) {
    if (secrets::may_contain_placeholder(f.value()) ||
        secrets::may_contain_placeholder(f.name_string())) {
      return true;
    }
  }
  return false;
}

// The user:password of every `Authorization: Basic` the client sent, decoded, one per line: a
// Basic password is where git and credential helpers (gh's among them) put a token, so a
// placeholder there is only seen decoded. "" (no allocation) when there is none.
std::string basic_credentials(const boost::beast::http::fields& fields) {
  std::string out;
  constexpr std::string_view kBasic = "basic ";
  const auto [begin, end] = fields.equal_range(boost::beast::http::field::authorization);
  for (auto it = begin; it != end; ++it) {
    const std::string_view value = it->value();
    if (value.size() <= kBasic.size() || !iequals_ascii(value.substr(0, kBasic.size()), kBasic)) {
      continue;
    }
    std::string_view encoded = value.substr(kBasic.size());
    while (!encoded.empty() && encoded.front() == ' ') encoded.remove_prefix(1);
    if (const auto decoded = secrets::base64_decode(encoded)) {
      out += *decoded;
      out += '\n';
    }
  }
  return out;
}

// Credentials (docs/credentials.md): the placeholder tripwire first, then the sandbox's inject
// rules. A credential goes only on a request inside a stream sandgate intercepted, whose
// authority the decision already held to the intercepted name (misdirected otherwise), over
// sandgate's own upstream TLS, which always verifies the destination's certificate.
// The checks are plain functions and only an injection waits in a coroutine of its own, so the
// frame every request pays for stays small (Asio's per-thread cache recycles frames up to
// about 1 KiB; a larger one is a malloc and a free per request).
class CredentialFilter final : public RequestFilter {
 public:
  boost::asio::awaitable<FilterResult> on_request(const Session& s,
                                                  ProxiedRequest& r) const override {
    if (!s.snap->injection) co_return FilterResult{};
    if (std::optional<FilterResult> refused = placeholder_refusal(s, r)) co_return *refused;
    const secrets::InjectRule* rule = rule_for(s, r);
    if (rule == nullptr) {
      cached_forms(s, r);
      co_return FilterResult{};
    }
    co_return co_await inject(s, r, *rule);
  }

 private:
  // The tripwire: a refusal when the request carries a placeholder where it may not go.
  static std::optional<FilterResult> placeholder_refusal(const Session& s,
                                                         const ProxiedRequest& r) {
    const Snapshot& snap = *s.snap;
    if (!snap.placeholders || r.fields == nullptr) return std::nullopt;
    const std::string basic = basic_credentials(*r.fields);
    // What leaves is scanned, not only what came: the target sandgate forwards is the
    // canonical one where rules apply (`%5f` decoded to `_`; THREATS 36).
    const std::string forwarded = r.path.find('%') == std::string_view::npos
                                      ? std::string()
                                      : forwarded_target(s, *r.host, r.port, r.path);
    if (!may_carry_placeholder(r, forwarded) && !secrets::may_contain_placeholder(basic)) {
      return std::nullopt;
    }
    // Rare (some text holds "sgph_"): only then are the texts collected.
    std::vector<std::string_view> texts = {r.path, forwarded, r.method, basic};
    for (const auto& f : *r.fields) {
      texts.push_back(f.value());
      texts.push_back(f.name_string());
    }
    const secrets::PlaceholderCheck check =
        secrets::check_placeholders(*snap.placeholders, snap.injection->for_sandbox(s.sandbox),
                                    s.sandbox, *r.host, r.port, r.intercepted != nullptr, texts);
    if (check.allowed) return std::nullopt;
    FilterResult out;
    out.next = false;
    // A git client is answered the way git prints it (as for a git rule's refusal).
    const policy::CanonicalPath path = policy::canonicalize_path(r.path);
    out.denial = policy::placeholder_denial(check.credential,
                                            policy::recognize_git(r.method, path.path, path.query));
    return out;
  }

  // The inject rule this request matches, if any.
  static const secrets::InjectRule* rule_for(const Session& s, const ProxiedRequest& r) {
    const secrets::InjectionRules* rules = s.snap->injection->for_sandbox(s.sandbox);
    if (rules == nullptr || r.intercepted == nullptr || r.fields == nullptr) return nullptr;
    // After an upgrade (WebSocket) the bytes are no longer HTTP messages sandgate scans for
    // the token on their way back: such requests never carry one.
    if (r.fields->count(boost::beast::http::field::upgrade) != 0) return nullptr;
    return rules->match(*r.host, r.port, r.path);
  }

  // Every response of a host some rule binds a credential to is scanned for the tokens of
  // those credentials that are cached now, also when the request got none (a path no rule
  // names, an Upgrade): THREATS 30, the host may reflect a token it stored from an earlier
  // request. Adds them to r.secret_forms. None is fetched for it; one not cached was not
  // handed out lately.
  static void cached_forms(const Session& s, ProxiedRequest& r) {
    const secrets::InjectionRules* rules = s.snap->injection->for_sandbox(s.sandbox);
    if (rules == nullptr) return;
    for (const secrets::InjectRule& rule : rules->rules()) {
      if (!rules->binds(rule.credential, *r.host, r.port)) continue;
      const auto token =
          s.deps.shared->credentials->cached(rule.credential, secrets::scope_for(rule, s.sandbox));
      if (token == nullptr) continue;
      secrets::Injection injection = secrets::apply(rule, token->value.view());
      secrets::cleanse(injection.value);
      for (std::string& form : injection.secret_forms) {
        if (std::find(r.secret_forms.begin(), r.secret_forms.end(), form) == r.secret_forms.end()) {
          r.secret_forms.push_back(std::move(form));
        }
      }
    }
    // As for a credentialed request: what is scanned is then what the sandbox reads.
    if (!r.secret_forms.empty() && r.fields != nullptr) {
      r.fields->set(boost::beast::http::field::accept_encoding, "identity");
    }
  }

  static boost::asio::awaitable<FilterResult> inject(const Session& s, ProxiedRequest& r,
                                                     const secrets::InjectRule& rule) {
    const secrets::Scope scope = secrets::scope_for(rule, s.sandbox);
    secrets::TokenResult got = co_await s.deps.shared->credentials->get(rule.credential, scope,
                                                                        s.limits().connect_timeout);
    r.credential = rule.credential;  // named by the request's lines, also the 503's
    if (!got.ok()) {
      FilterResult out;
      out.next = false;
      out.error = Errc::credential_unavailable;
      out.retryable = got.error->retryable;
      out.message = "credential " + rule.credential + ": " + got.error->message;
      out.endpoint_status = got.error->endpoint_status;
      out.endpoint_error = got.error->endpoint_error;
      co_return out;
    }
    if (rule.as == secrets::InjectAs::aws_sigv4) {
      co_return co_await sign_again(s, r, rule, std::move(got.token));
    }
    secrets::Injection injection = secrets::apply(rule, got.token->value.view());
    r.fields->erase(injection.name);
    r.fields->insert(injection.name, injection.value);
    secrets::cleanse(injection.value);
    // The response is scanned for the token on its way back (THREATS 22): ask for it
    // uncompressed (one compressed regardless is decoded to be scanned, THREATS 30).
    r.fields->set(boost::beast::http::field::accept_encoding, "identity");
    r.injected = &rule;
    r.token = std::move(got.token);
    r.secret_forms = std::move(injection.secret_forms);
    cached_forms(s, r);  // another credential bound to the host may come back too
    co_return FilterResult{};
  }

  // AWS (docs/credentials.md, "AWS keys"): the client signed with the sandbox's placeholder
  // keys; the request leaves signed again with the real ones. The signature covers the
  // payload's hash: a request that does not declare it (x-amz-content-sha256, which S3's
  // clients send) is hashed here, its body read whole first.
  static boost::asio::awaitable<FilterResult> sign_again(
      const Session& s, ProxiedRequest& r, const secrets::InjectRule& rule,
      std::shared_ptr<const secrets::Token> token) {
    const auto declared = r.fields->find("x-amz-content-sha256");
    std::string payload_hash(declared == r.fields->end() ? std::string_view()
                                                         : std::string_view(declared->value()));
    if (payload_hash.empty() && signed_with_sigv4(*r.fields)) {
      if (r.body == nullptr) co_return FilterResult{};  // never so inside an intercepted stream
      const WholeBody body = co_await r.body->read_whole(kMaxSignedBody);
      if (body.error != Errc::ok) co_return failure(body.error, body_message(body.error), false);
      payload_hash = secrets::sha256_hex(body.bytes);
    }
    co_return resign_head(s, r, rule, std::move(token), payload_hash);
  }

  // A body read whole to be hashed is at most this large (SigV4 requests without a declared
  // hash are API calls: JSON, query or XML documents, far smaller).
  static constexpr std::size_t kMaxSignedBody = 8 * 1024 * 1024;

  static bool signed_with_sigv4(const boost::beast::http::fields& fields) {
    const std::string_view value =
        http::first_value(fields, boost::beast::http::field::authorization);
    return value.starts_with(secrets::sigv4::kAlgorithm);
  }

  static std::string body_message(Errc error) {
    return error == Errc::request_body_too_large
               ? "the body of a request signed again without x-amz-content-sha256 is read whole "
                 "to be hashed, and this one is over 8 MiB"
               : "the request body ended before its length";
  }

  static FilterResult failure(Errc error, std::string message, bool retryable) {
    FilterResult out;
    out.next = false;
    out.error = error;
    out.message = std::move(message);
    out.retryable = retryable;
    return out;
  }

  static FilterResult resign_head(const Session& s, ProxiedRequest& r,
                                  const secrets::InjectRule& rule,
                                  std::shared_ptr<const secrets::Token> token,
                                  std::string_view payload_hash) {
    namespace sigv4 = secrets::sigv4;
    const std::optional<sigv4::Credentials> keys = sigv4::unpack_credentials(token->value.view());
    if (!keys) {
      return failure(Errc::credential_unavailable,
                     "credential " + rule.credential + ": not an AWS key pair", false);
    }
    // The request as it will leave: its fields, the authority it will name, the target.
    std::vector<sigv4::Field> fields;
    for (const auto& f : *r.fields) {
      if (!iequals_ascii(f.name_string(), "host")) fields.push_back({f.name_string(), f.value()});
    }
    fields.push_back({"host", r.authority});
    const std::string target = forwarded_target(s, *r.host, r.port, r.path);
    const std::string placeholder =
        s.snap->placeholders->key().placeholder_for(s.sandbox, rule.credential);
    const sigv4::ResignResult result =
        sigv4::resign({r.method, target, fields}, payload_hash, placeholder, *keys);
    if (!result.resigned) {
      switch (result.refusal) {
        case sigv4::ResignRefusal::not_signed:
          return FilterResult{};  // an anonymous request goes as it is, with no credential
        case sigv4::ResignRefusal::foreign_key: {
          // Signed with keys sandgate did not hand out: someone else's (exfiltration's shape).
          FilterResult out;
          out.next = false;
          out.denial = policy::placeholder_denial(rule.credential);
          return out;
        }
        default:
          return failure(Errc::signature_not_resignable,
                         "credential " + rule.credential +
                             ": the request cannot be signed again (" +
                             std::string(sigv4::refusal_name(result.refusal)) + ")",
                         false);
      }
    }
    const sigv4::Resigned& resigned = *result.resigned;
    r.fields->set(boost::beast::http::field::authorization, resigned.authorization);
    if (resigned.security_token.empty()) {
      r.fields->erase("x-amz-security-token");
    } else {
      r.fields->set("x-amz-security-token", resigned.security_token);
    }
    r.fields->set(boost::beast::http::field::accept_encoding, "identity");
    // An upload signed chunk by chunk: each chunk's signature chains from the new one.
    if (payload_hash == sigv4::kStreamingPayload ||
        payload_hash == sigv4::kStreamingPayloadTrailer) {
      r.resign_chunks = std::make_unique<sigv4::ChunkResigner>(
          keys->secret_access_key, resigned.scope, resigned.amz_date, resigned.signature,
          payload_hash == sigv4::kStreamingPayloadTrailer);
    }
    r.credential = rule.credential;
    r.injected = &rule;
    r.secret_forms = secrets::apply(rule, token->value.view()).secret_forms;
    r.token = std::move(token);
    cached_forms(s, r);
    return FilterResult{};
  }
};

const DecisionFilter kDecision;
const CredentialFilter kCredential;
const std::array<const RequestFilter*, 2> kChain = {&kDecision, &kCredential};

}  // namespace

std::span<const RequestFilter* const> request_filters() {
  return kChain;
}

boost::asio::awaitable<ChainResult> filter_request(const Session& s, ProxiedRequest& r) {
  // What never leaves sandgate goes first, whatever the wire, so the filters see (and the
  // tripwire scans) only what may be forwarded.
  if (r.fields != nullptr) http::strip_proxy_only(*r.fields);
  for (const RequestFilter* f : request_filters()) {
    FilterResult result = co_await f->on_request(s, r);
    if (result.next) continue;
    if (result.error != Errc::ok) {
      co_return ChainResult{false,
                            r.decision,
                            result.error,
                            std::move(result.message),
                            result.retryable,
                            result.endpoint_status,
                            std::move(result.endpoint_error)};
    }
    co_return ChainResult{false, std::move(result.denial), Errc::ok, {}, true};
  }
  co_return ChainResult{true, r.decision, Errc::ok, {}, true};
}

}  // namespace sandgate::proxy
