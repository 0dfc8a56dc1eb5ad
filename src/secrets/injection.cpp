#include "secrets/injection.hpp"

#include <algorithm>
#include <set>

#include "common/ascii.hpp"
#include "policy/path.hpp"
#include "policy/request_rules.hpp"
#include "secrets/encoding.hpp"
#include "secrets/secret_bytes.hpp"
#include "secrets/sigv4.hpp"

namespace sandgate::secrets {

namespace {

bool pattern_matches(const policy::HostPattern& pattern, std::string_view name) {
  if (!pattern.wildcard) return name == pattern.domain;
  return name.size() > pattern.domain.size() + 1 && name.ends_with(pattern.domain) &&
         name[name.size() - pattern.domain.size() - 1] == '.';
}

}  // namespace

bool path_prefix_matches(std::string_view prefix, std::string_view path) {
  if (!path.starts_with(prefix)) return false;
  if (prefix.empty() || prefix.back() == '/' || path.size() == prefix.size()) return true;
  return path[prefix.size()] == '/';
}

Scope scope_for(const InjectRule& rule, std::string_view sandbox) {
  Scope scope = rule.scope;
  if (rule.session_per_sandbox) scope.sandbox = sandbox;
  return scope;
}

Injection apply(const InjectRule& rule, std::string_view token) {
  Injection out;
  if (rule.as == InjectAs::aws_sigv4) {
    // The key id is no secret to AWS, but it names the real key: the sandbox never sees it.
    if (const auto keys = sigv4::unpack_credentials(token)) {
      for (const std::string_view part :
           {keys->access_key_id, keys->secret_access_key, keys->session_token}) {
        if (!part.empty()) out.secret_forms.emplace_back(part);
      }
    }
    return out;
  }
  out.secret_forms.emplace_back(token);
  switch (rule.as) {
    case InjectAs::bearer:
      out.name = "Authorization";
      out.value = "Bearer " + std::string(token);
      break;
    case InjectAs::basic: {
      std::string pair = rule.user + ":" + std::string(token);
      std::string encoded = base64(pair);
      // An echo may write the base64 URL-safe, or without its padding (THREATS 30).
      std::string url = base64url(pair);
      cleanse(pair);
      out.name = "Authorization";
      out.value = "Basic " + encoded;
      std::string unpadded = encoded.substr(0, encoded.find_last_not_of('=') + 1);
      std::string url_padded = url + std::string(encoded.size() - unpadded.size(), '=');
      for (std::string* form : {&encoded, &unpadded, &url, &url_padded}) {
        if (std::find(out.secret_forms.begin(), out.secret_forms.end(), *form) ==
            out.secret_forms.end()) {
          out.secret_forms.push_back(*form);
        }
        cleanse(*form);
      }
      break;
    }
    case InjectAs::header: {
      out.name = rule.header;
      const std::size_t at = rule.format.find("{token}");
      out.value = at == std::string::npos
                      ? rule.format
                      : rule.format.substr(0, at) + std::string(token) + rule.format.substr(at + 7);
      break;
    }
    case InjectAs::aws_sigv4:
      break;
  }
  return out;
}

InjectionRules::InjectionRules(std::vector<InjectRule> rules, std::vector<std::uint16_t> ports)
    : rules_(std::move(rules)), ports_(std::move(ports)) {
  std::sort(ports_.begin(), ports_.end());
  for (const InjectRule& rule : rules_) credentials_.push_back(rule.credential);
  std::sort(credentials_.begin(), credentials_.end());
  credentials_.erase(std::unique(credentials_.begin(), credentials_.end()), credentials_.end());
}

bool InjectionRules::host_matches(const InjectRule& rule, const policy::Host& host,
                                  std::uint16_t port) const {
  if (!host.is_name()) return false;
  return std::any_of(rule.hosts.begin(), rule.hosts.end(), [&](const policy::HostPattern& p) {
    const bool port_ok =
        p.port ? *p.port == port : std::binary_search(ports_.begin(), ports_.end(), port);
    return port_ok && pattern_matches(p, host.name);
  });
}

const InjectRule* InjectionRules::match(const policy::Host& host, std::uint16_t port,
                                        std::string_view target) const {
  std::optional<policy::CanonicalPath> canonical;  // only when a rule has prefixes
  // Where the http rules match paths without case (GitHub resolves owners and repositories in
  // any case), so do the prefixes: "/Acme/Widgets.git" is "/acme/widgets.git" there.
  const bool fold = policy::host_ignores_path_case(host.name);
  const auto lowered = [](std::string_view s) {
    std::string out(s);
    std::transform(out.begin(), out.end(), out.begin(), lower_ascii);
    return out;
  };
  for (const InjectRule& rule : rules_) {
    if (!host_matches(rule, host, port)) continue;
    if (rule.path_prefixes.empty()) return &rule;
    if (!canonical) {
      canonical = policy::canonicalize_path(target);
      if (fold) canonical->path = lowered(canonical->path);
    }
    if (canonical->ambiguous) continue;
    for (const std::string& prefix : rule.path_prefixes) {
      if (path_prefix_matches(fold ? lowered(prefix) : prefix, canonical->path)) return &rule;
    }
  }
  return nullptr;
}

bool InjectionRules::binds(std::string_view credential, const policy::Host& host,
                           std::uint16_t port) const {
  return std::any_of(rules_.begin(), rules_.end(), [&](const InjectRule& rule) {
    return rule.credential == credential && host_matches(rule, host, port);
  });
}

const InjectionRules* InjectionTable::for_sandbox(std::string_view id) const {
  const auto* rules = sandboxes_.find(id);
  return rules == nullptr ? nullptr : rules->get();
}

std::size_t InjectionTable::distinct_rule_sets() const {
  std::set<const InjectionRules*> distinct;
  sandboxes_.for_each([&](const std::string&, const std::shared_ptr<const InjectionRules>& rules) {
    distinct.insert(rules.get());
  });
  return distinct.size();
}

void InjectionTable::add(std::string id, std::shared_ptr<const InjectionRules> rules) {
  if (rules == nullptr || rules->empty()) return;
  sandboxes_.insert_or_assign(std::move(id), std::move(rules));
}

void InjectionTable::remove(std::string_view id) {
  sandboxes_.erase(id);
}

std::shared_ptr<const InjectionRules> InjectionTable::profile_rules(
    const std::string& profile, const std::vector<std::uint16_t>& ports,
    const std::vector<InjectRule>& inherited) {
  auto& rules = profiles_[{profile, ports}];
  if (rules == nullptr) rules = std::make_shared<const InjectionRules>(inherited, ports);
  return rules;
}

}  // namespace sandgate::secrets
