// libFuzzer target for the matchers that decide on one request inside an intercepted stream:
// the http rules (policy::Policy::decide_request_rules, over a profile's rules and a
// sandbox's own) and the inject rules (secrets::InjectionRules::match and binds). The input
// generates rules (host patterns, methods, path globs, path case, allow or deny, enforce or
// audit; inject rules with path prefixes) and requests (host, port, method in any case,
// method-override fields, a target with a query that may carry _method). A reference written
// plainly here decides the same request: host patterns compared by name (a wildcard matches
// proper subdomains only) and port (the sandbox's ports when the pattern has none); globs
// matched by recursion ('*' any run within a segment, '?' one character, "**" any number of
// whole segments), prefixes on segment boundaries; the first rule matching decides, the
// request as every method it asks for. Paths and globs are canonicalised by the library's own
// canonicalize_path and PathGlob::parse (fuzzed by path_fuzz). Aborts on any disagreement.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_input.hpp"
#include "policy/host.hpp"
#include "policy/host_pattern.hpp"
#include "policy/path.hpp"
#include "policy/policy.hpp"
#include "policy/request_rules.hpp"
#include "secrets/injection.hpp"

namespace {

namespace policy = sandgate::policy;
namespace secrets = sandgate::secrets;

using sandgate::fuzz::check;
using sandgate::fuzz::Input;

const std::string_view kPatterns[] = {"example.com",    "*.example.com",     "api.example.com:8443",
                                      "github.com",     "*.github.com",      "EXAMPLE.com.",
                                      "*.com",          "a.b.example.com",   "*.a.b.example.com",
                                      "example.com:80", "*.example.com:443", "api.github.com"};
const std::string_view kHosts[] = {
    "example.com",    "api.example.com", "a.b.example.com", "github.com",
    "API.GitHub.com", "xexample.com",    "b.example.com",   "com",
    "example.com."};
const std::uint16_t kPorts[] = {443, 80, 8443, 8080};
const std::string_view kRuleMethods[] = {"GET", "POST", "PUT", "DELETE", "HEAD", "PATCH"};
const std::string_view kMethods[] = {"GET", "get",    "Post",  "HEAD",    "head",
                                     "PUT", "DELETE", "PATCH", "OPTIONS", "pAtCh"};
const std::string_view kOverrides[] = {"DELETE", "put, patch", " get ,", "", "Delete,DELETE"};
const std::string_view kQueries[] = {"",
                                     "_method=delete",
                                     ".method=PUT&x=1",
                                     "%5Fmethod=patch",
                                     "a=b&_method=get%2C+post",
                                     "[method=head",
                                     "_method",
                                     "x_method=put",
                                     "q=%41"};
// What paths and globs are made of.
const std::string_view kPieces[] = {"/",   "/",   "/",   "a",  "A",    "b",   "ab",
                                    "*",   "?",   "**",  ".",  "..",   "%41", "%2F",
                                    "x.y", "-_~", "%7e", "Ab", "repos"};

std::string path_text(Input& in, bool glob) {
  std::string out = "/";
  for (int i = 0, n = in.byte() % 8; i < n; ++i) {
    const std::string_view piece = in.pick(kPieces);
    if (!glob && (piece == "*" || piece == "?" || piece == "**")) continue;
    out += piece;
  }
  return out;
}

bool ieq(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const auto low = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c + 32) : c; };
    if (low(a[i]) != low(b[i])) return false;
  }
  return true;
}

std::string upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 32);
  }
  return out;
}

// The reference matchers.
bool host_matches(const policy::HostPattern& p, std::string_view name, std::uint16_t port,
                  const std::vector<std::uint16_t>& ports) {
  const bool port_ok =
      p.port ? *p.port == port : std::find(ports.begin(), ports.end(), port) != ports.end();
  if (!port_ok) return false;
  if (!p.wildcard) return ieq(name, p.domain);
  return name.size() > p.domain.size() + 1 &&
         ieq(name.substr(name.size() - p.domain.size()), p.domain) &&
         name[name.size() - p.domain.size() - 1] == '.';
}

bool segment_matches(std::string_view glob, std::string_view s, bool fold) {
  if (glob.empty()) return s.empty();
  if (glob.front() == '*') {
    return segment_matches(glob.substr(1), s, fold) ||
           (!s.empty() && segment_matches(glob, s.substr(1), fold));
  }
  if (s.empty()) return false;
  const bool same = glob.front() == '?' || glob.front() == s.front() ||
                    (fold && ieq(glob.substr(0, 1), s.substr(0, 1)));
  return same && segment_matches(glob.substr(1), s.substr(1), fold);
}

std::vector<std::string_view> segments(std::string_view path) {
  std::vector<std::string_view> out;
  std::size_t from = 1;
  for (;;) {
    const std::size_t slash = path.find('/', from);
    out.push_back(path.substr(from, slash == std::string_view::npos ? slash : slash - from));
    if (slash == std::string_view::npos) return out;
    from = slash + 1;
  }
}

bool segments_match(const std::vector<std::string_view>& g, std::size_t gi,
                    const std::vector<std::string_view>& p, std::size_t pi, bool fold) {
  if (gi == g.size()) return pi == p.size();
  if (g[gi] == "**") {
    return segments_match(g, gi + 1, p, pi, fold) ||
           (pi < p.size() && segments_match(g, gi, p, pi + 1, fold));
  }
  return pi < p.size() && segment_matches(g[gi], p[pi], fold) &&
         segments_match(g, gi + 1, p, pi + 1, fold);
}

bool glob_matches(std::string_view glob, std::string_view path, bool fold) {
  if (path.empty() || path.front() != '/') return false;
  return segments_match(segments(glob), 0, segments(path), 0, fold);
}

std::string percent_decoded(std::string_view s) {
  const auto hex = [](char c) {
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
  };
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && hex(s[i + 1]) >= 0 && hex(s[i + 2]) >= 0) {
      out += static_cast<char>(hex(s[i + 1]) * 16 + hex(s[i + 2]));
      i += 2;
    } else {
      out += s[i] == '+' ? ' ' : s[i];
    }
  }
  return out;
}

std::vector<std::string_view> split(std::string_view s, char by) {
  std::vector<std::string_view> out;
  for (std::size_t from = 0;;) {
    const std::size_t at = s.find(by, from);
    out.push_back(s.substr(from, at == std::string_view::npos ? at : at - from));
    if (at == std::string_view::npos) return out;
    from = at + 1;
  }
}

std::vector<std::string> reference_methods(std::string_view method,
                                           const std::vector<std::string_view>& overrides,
                                           std::string_view query) {
  std::vector<std::string> out = {upper(method)};
  const auto add = [&](std::string_view list) {
    for (std::string_view one : split(list, ',')) {
      while (!one.empty() && (one.front() == ' ' || one.front() == '\t')) one.remove_prefix(1);
      while (!one.empty() && (one.back() == ' ' || one.back() == '\t')) one.remove_suffix(1);
      if (!one.empty() && std::find(out.begin(), out.end(), upper(one)) == out.end()) {
        out.push_back(upper(one));
      }
    }
  };
  for (const std::string_view v : overrides) add(v);
  if (query.empty()) return out;
  for (const std::string_view param : split(query, '&')) {
    const std::size_t eq = param.find('=');
    if (eq == std::string_view::npos) continue;
    const std::string name = percent_decoded(param.substr(0, eq));
    if (name == "_method" || name == ".method" || name == " method" || name == "[method") {
      add(percent_decoded(param.substr(eq + 1)));
    }
  }
  return out;
}

struct Outcome {
  bool allowed = false;
  bool audit = false;
  policy::Reason reason = policy::Reason::no_matching_rule;
  std::string rule;
};

Outcome refusal(policy::Reason reason, std::string rule, bool audit) {
  return {audit, audit, reason, std::move(rule)};
}

std::optional<Outcome> reference_decision(const std::vector<const policy::HttpRule*>& rules,
                                          std::string_view name, std::uint16_t port,
                                          const std::vector<std::uint16_t>& ports,
                                          std::string_view method,
                                          const std::vector<std::string_view>& overrides,
                                          std::string_view target) {
  std::vector<const policy::HttpRule*> named;
  for (const policy::HttpRule* r : rules) {
    if (std::any_of(r->hosts.begin(), r->hosts.end(), [&](const policy::HostPattern& p) {
          return host_matches(p, name, port, ports);
        })) {
      named.push_back(r);
    }
  }
  if (named.empty()) return std::nullopt;
  const bool enforce = std::any_of(named.begin(), named.end(), [](const policy::HttpRule* r) {
    return r->mode == policy::RuleMode::enforce;
  });
  const policy::CanonicalPath path = policy::canonicalize_path(target);
  if (path.ambiguous) return refusal(policy::Reason::ambiguous_path, "", !enforce);
  const bool github = name == "github.com" || name.ends_with(".github.com");
  std::optional<Outcome> allowed, audited;
  for (const std::string& m : reference_methods(method, overrides, path.query)) {
    std::optional<Outcome> d;
    for (const policy::HttpRule* r : named) {
      const auto listed = [&](std::string_view x) {
        return std::find(r->methods.begin(), r->methods.end(), x) != r->methods.end();
      };
      if (!r->methods.empty() && !listed(m) && !(m == "HEAD" && listed("GET"))) continue;
      const bool fold = r->path_case ? *r->path_case == policy::PathCase::insensitive : github;
      if (!r->paths.empty() &&
          std::none_of(r->paths.begin(), r->paths.end(), [&](const policy::PathGlob& g) {
            return glob_matches(g.text(), path.path, fold);
          })) {
        continue;
      }
      d = r->allow ? Outcome{true, false, policy::Reason::allowed_by_rule, r->origin}
                   : refusal(policy::Reason::denied_by_http_rule, r->origin,
                             r->mode == policy::RuleMode::audit);
      break;
    }
    if (!d) d = refusal(policy::Reason::no_matching_http_rule, "", !enforce);
    if (!d->allowed) return d;
    if (d->audit && !audited) audited = d;
    if (!d->audit && !allowed) allowed = d;
  }
  return audited ? audited : allowed;
}

policy::HttpRule make_http_rule(Input& in, std::string origin) {
  policy::HttpRule r;
  const std::uint8_t shape = in.byte();
  for (int i = 0, n = 1 + shape % 2; i < n; ++i) {
    if (auto p = policy::parse_host_pattern(in.pick(kPatterns))) r.hosts.push_back(*p);
  }
  for (int i = 0, n = (shape >> 1) % 3; i < n; ++i) r.methods.emplace_back(in.pick(kRuleMethods));
  for (int i = 0, n = (shape >> 3) % 3; i < n; ++i) {
    if (auto g = policy::PathGlob::parse(path_text(in, true))) r.paths.push_back(*g);
  }
  if ((shape & 0x20) != 0) {
    r.path_case = (shape & 0x40) != 0 ? policy::PathCase::insensitive : policy::PathCase::sensitive;
  }
  r.allow = (shape & 0x80) != 0;
  r.mode = in.byte() % 4 == 0 ? policy::RuleMode::audit : policy::RuleMode::enforce;
  r.origin = std::move(origin);
  return r;
}

secrets::InjectRule make_inject_rule(Input& in, std::string credential) {
  secrets::InjectRule r;
  const std::uint8_t shape = in.byte();
  for (int i = 0, n = 1 + shape % 2; i < n; ++i) {
    if (auto p = policy::parse_host_pattern(in.pick(kPatterns))) r.hosts.push_back(*p);
  }
  for (int i = 0, n = (shape >> 1) % 3; i < n; ++i) {
    const policy::CanonicalPath c = policy::canonicalize_path(path_text(in, false));
    if (!c.ambiguous && c.path != "*") r.path_prefixes.push_back(c.path);
  }
  r.credential = std::move(credential);
  r.origin = "inject[" + r.credential + "]";
  return r;
}

void check_http_rules(Input& in) {
  const std::vector<std::uint16_t> ports =
      (in.byte() & 1) != 0 ? std::vector<std::uint16_t>{80, 443} : std::vector<std::uint16_t>{443};
  auto profile = std::make_shared<policy::RuleLists>();
  policy::SandboxSpec spec;
  spec.id = "sb";
  spec.ports = ports;
  const std::uint8_t counts = in.byte();
  for (int i = 0, n = counts % 4; i < n; ++i) {
    profile->http_rules.push_back(
        make_http_rule(in, "profiles.p.http_rules[" + std::to_string(i) + "]"));
  }
  for (int i = 0, n = (counts >> 2) % 4; i < n; ++i) {
    spec.http_rules.push_back(
        make_http_rule(in, "sandboxes.sb.http_rules[" + std::to_string(i) + "]"));
  }
  if ((counts & 0x10) != 0) spec.profile = profile;
  std::vector<const policy::HttpRule*> all;
  if (spec.profile) {
    for (const auto& r : profile->http_rules) all.push_back(&r);
  }
  for (const auto& r : spec.http_rules) all.push_back(&r);
  const policy::Policy pol({spec}, {});

  for (int round = 0; round < 4 && !in.rest.empty(); ++round) {
    const policy::Host host = policy::normalize_host(in.pick(kHosts));
    const std::uint16_t port = kPorts[in.byte() % std::size(kPorts)];
    const std::string_view method = in.pick(kMethods);
    std::vector<std::string_view> overrides;
    for (int i = 0, n = in.byte() % 3; i < n; ++i) overrides.push_back(in.pick(kOverrides));
    std::string target = path_text(in, false);
    const std::string_view query = in.pick(kQueries);
    if (!query.empty()) target += "?" + std::string(query);
    const std::optional<policy::Decision> got =
        pol.decide_request_rules("sb", host, port, method, target, overrides);
    const std::optional<Outcome> want =
        reference_decision(all, host.name, port, ports, method, overrides, target);
    check(got.has_value() == want.has_value());
    if (!got) continue;
    check(got->allowed == want->allowed);
    check(got->audit == want->audit);
    check(got->reason == want->reason);
    check(got->rule == want->rule);
  }
}

void check_inject_rules(Input& in) {
  const std::vector<std::uint16_t> ports =
      (in.byte() & 1) != 0 ? std::vector<std::uint16_t>{443, 80} : std::vector<std::uint16_t>{443};
  static const std::string_view kCredentials[] = {"github", "npm", "pypi"};
  std::vector<secrets::InjectRule> rules;
  for (int i = 0, n = 1 + in.byte() % 5; i < n; ++i) {
    rules.push_back(make_inject_rule(in, std::string(in.pick(kCredentials))));
  }
  const secrets::InjectionRules compiled(rules, ports);
  for (int round = 0; round < 4 && !in.rest.empty(); ++round) {
    const policy::Host host = policy::normalize_host(in.pick(kHosts));
    const std::uint16_t port = kPorts[in.byte() % std::size(kPorts)];
    std::string target = path_text(in, false);
    const std::string_view query = in.pick(kQueries);
    if (!query.empty()) target += "?" + std::string(query);
    policy::CanonicalPath path = policy::canonicalize_path(target);
    // On GitHub's hosts, prefixes match without case, as the http rules' paths do there.
    const bool fold =
        host.is_name() && (host.name == "github.com" || host.name.ends_with(".github.com"));
    const auto folded = [fold](std::string s) {
      if (fold) {
        for (char& c : s) c = (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
      }
      return s;
    };
    path.path = folded(path.path);
    const secrets::InjectRule* want = nullptr;
    for (const secrets::InjectRule& r : rules) {
      const bool host_ok = std::any_of(r.hosts.begin(), r.hosts.end(), [&](const auto& p) {
        return host.is_name() && host_matches(p, host.name, port, ports);
      });
      if (!host_ok) continue;
      const bool path_ok =
          r.path_prefixes.empty() ||
          (!path.ambiguous &&
           std::any_of(r.path_prefixes.begin(), r.path_prefixes.end(), [&](const std::string& as) {
             const std::string p = folded(as);
             return path.path == p ||
                    (path.path.starts_with(p) && (p.ends_with('/') || path.path[p.size()] == '/'));
           }));
      if (path_ok) {
        want = &r;
        break;
      }
    }
    const secrets::InjectRule* got = compiled.match(host, port, target);
    check((got == nullptr) == (want == nullptr));
    if (got != nullptr) check(got - compiled.rules().data() == want - rules.data());
    for (const std::string_view credential : kCredentials) {
      const bool binds = std::any_of(rules.begin(), rules.end(), [&](const auto& r) {
        return r.credential == credential &&
               std::any_of(r.hosts.begin(), r.hosts.end(), [&](const auto& p) {
                 return host.is_name() && host_matches(p, host.name, port, ports);
               });
      });
      check(compiled.binds(credential, host, port) == binds);
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  Input in{{reinterpret_cast<const char*>(data), size}};
  if ((in.byte() & 1) == 0) {
    check_http_rules(in);
  } else {
    check_inject_rules(in);
  }
  return 0;
}
