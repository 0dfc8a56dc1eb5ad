#include "policy/request_rules.hpp"

#include <algorithm>

#include "policy/compiled_rules.hpp"

namespace sandgate::policy {

namespace {

char lower(char c) {
  return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
}

std::string lowercase(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), lower);
  return out;
}

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(),
                                            [](char x, char y) { return lower(x) == lower(y); });
}

// Every %XX decoded (an invalid escape is kept), for query parameter names and values.
std::string percent_decoded(std::string_view s) {
  const auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    c = lower(c);
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
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

// "/Acme/Widget.git/" -> "acme/widget".
std::string normalize_repo(std::string_view path) {
  std::string repo = lowercase(path);
  while (!repo.empty() && repo.back() == '/') repo.pop_back();
  if (repo.ends_with(".git") && !repo.ends_with("/.git") && repo != ".git") {
    repo.resize(repo.size() - 4);
  }
  while (!repo.empty() && repo.back() == '/') repo.pop_back();
  const auto first = repo.find_first_not_of('/');
  return first == std::string::npos ? std::string() : repo.substr(first);
}

}  // namespace

std::string RepoPattern::to_string() const {
  return host.to_string() + path.text();
}

std::optional<RepoPattern> parse_repo_pattern(std::string_view text, std::string* error) {
  auto fail = [&](std::string message) -> std::optional<RepoPattern> {
    if (error) *error = std::move(message);
    return std::nullopt;
  };
  const auto slash = text.find('/');
  if (slash == std::string_view::npos || slash + 1 == text.size()) {
    return fail("expected \"host/repository\", e.g. \"github.com/acme/*\"");
  }
  std::string reason;
  auto host = parse_host_pattern(text.substr(0, slash), &reason);
  if (!host) return fail(std::move(reason));
  auto path = PathGlob::parse_repo(text.substr(slash), &reason);
  if (!path) return fail(std::move(reason));
  if (path->text() == "/") return fail("expected \"host/repository\", e.g. \"github.com/acme/*\"");
  return RepoPattern{std::move(*host), std::move(*path)};
}

std::string_view git_operation_name(GitOperation op) {
  switch (op) {
    case GitOperation::none:
      return "none";
    case GitOperation::fetch:
      return "fetch";
    case GitOperation::push:
      return "push";
  }
  return "unknown";
}

std::string_view GitRequest::service() const {
  switch (op) {
    case GitOperation::fetch:
      return "git-upload-pack";
    case GitOperation::push:
      return "git-receive-pack";
    case GitOperation::none:
      break;
  }
  return {};
}

GitRequest recognize_git(std::string_view method, std::string_view path, std::string_view query) {
  // Case-insensitive on purpose: a server that takes "post" or ".../INFO/REFS" must not turn
  // a push into a request the git rules never see.
  std::string lowered = lowercase(path);
  while (lowered.size() > 1 && lowered.back() == '/') lowered.pop_back();
  const std::string_view p = lowered;
  GitRequest g;
  std::string_view repo;
  if (iequals(method, "GET") && p.ends_with("/info/refs")) {
    bool upload = false;
    bool receive = false;
    for (std::string_view rest = query; !rest.empty();) {
      const auto amp = rest.find('&');
      const std::string_view param = rest.substr(0, amp);
      rest = amp == std::string_view::npos ? std::string_view() : rest.substr(amp + 1);
      const auto eq = param.find('=');
      if (eq == std::string_view::npos || percent_decoded(param.substr(0, eq)) != "service") {
        continue;
      }
      const std::string value = percent_decoded(param.substr(eq + 1));
      upload = upload || value == "git-upload-pack";
      receive = receive || value == "git-receive-pack";
    }
    if (!upload && !receive) return g;
    g.op = receive ? GitOperation::push : GitOperation::fetch;
    g.advertisement = true;
    repo = p.substr(0, p.size() - std::string_view("/info/refs").size());
  } else if (iequals(method, "POST") && p.ends_with("/git-upload-pack")) {
    g.op = GitOperation::fetch;
    repo = p.substr(0, p.size() - std::string_view("/git-upload-pack").size());
  } else if (iequals(method, "POST") && p.ends_with("/git-receive-pack")) {
    g.op = GitOperation::push;
    repo = p.substr(0, p.size() - std::string_view("/git-receive-pack").size());
  } else {
    return g;
  }
  g.repo = normalize_repo(repo);
  return g;
}

bool valid_rule_method(std::string_view method, std::string* error) {
  static constexpr std::string_view kTchar = "!#$%&'*+-.^_`|~";
  const auto fail = [&](std::string message) {
    if (error) *error = std::move(message);
    return false;
  };
  if (method.empty()) return fail("an HTTP method is not empty");
  for (const char c : method) {
    if (c >= 'a' && c <= 'z') {
      std::string upper(method);
      std::transform(upper.begin(), upper.end(), upper.begin(), [](char x) {
        return x >= 'a' && x <= 'z' ? static_cast<char>(x - 'a' + 'A') : x;
      });
      return fail("methods are case-sensitive; write \"" + upper + "\"");
    }
    const bool tchar = (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                       kTchar.find(c) != std::string_view::npos;
    if (!tchar) return fail("not an HTTP method token");
  }
  return true;
}

namespace detail {

namespace {

Decision refusal(Reason reason, std::string rule, bool audit) {
  Decision d;
  d.allowed = audit;
  d.audit = audit;
  d.reason = reason;
  d.rule = std::move(rule);
  return d;
}

// `http_rules = [{ hosts = [...], methods = [...], paths = [...], action = "allow" }]` for
// exactly this request; empty when no rule could say it (a method config would refuse, a '*'
// in the path, which a glob would read as a wildcard). Appended after the rules that matched
// nothing, it is the first to match.
std::string suggest_http_rule(std::string_view name, std::uint16_t port, std::string_view method,
                              std::string_view path) {
  if (!valid_rule_method(method) || path.find('*') != std::string_view::npos ||
      !PathGlob::parse(path)) {
    return {};
  }
  const std::string host =
      port == 443 ? std::string(name) : std::string(name) + ":" + std::to_string(port);
  return "http_rules = [{ hosts = [\"" + host + "\"], methods = [\"" + std::string(method) +
         "\"], paths = [\"" + std::string(path) + "\"], action = \"allow\" }]";
}

Decision allowance(std::string rule) {
  Decision d;
  d.allowed = true;
  d.reason = Reason::allowed_by_rule;
  d.rule = std::move(rule);
  return d;
}

}  // namespace

CompiledRequestRules::CompiledRequestRules(const RuleLists& lists)
    : http_(lists.http_rules), git_(lists.git_rules) {
  for (const RuleSource& r : lists.inspect) inspect_.add(r.pattern, {r.pattern.port.value_or(0)});
  for (std::size_t i = 0; i < http_.size(); ++i) {
    for (const HostPattern& h : http_[i].hosts) {
      http_hosts_.add(h, {h.port.value_or(0), i, 0});
      inspect_.add(h, {h.port.value_or(0)});
    }
  }
  for (std::size_t i = 0; i < git_.size(); ++i) {
    for (std::size_t j = 0; j < git_[i].repos.size(); ++j) {
      const HostPattern& h = git_[i].repos[j].host;
      git_hosts_.add(h, {h.port.value_or(0), i, j});
      inspect_.add(h, {h.port.value_or(0)});
    }
  }
}

namespace {

bool port_ok(const std::vector<std::uint16_t>& ports, std::uint16_t rule_port, std::uint16_t port) {
  return rule_port == 0 ? std::binary_search(ports.begin(), ports.end(), port) : rule_port == port;
}

}  // namespace

bool CompiledRequestRules::inspects(std::span<const CompiledRequestRules* const> layers,
                                    const std::vector<std::uint16_t>& ports, std::string_view name,
                                    std::uint16_t port) {
  return std::any_of(layers.begin(), layers.end(), [&](const CompiledRequestRules* layer) {
    return layer->inspect_.find(
               name, [&](const Entry& e) { return port_ok(ports, e.port, port); }) != nullptr;
  });
}

std::vector<CompiledRequestRules::Entry> CompiledRequestRules::named(
    const NameIndex<Entry>& index, const std::vector<std::uint16_t>& ports, std::string_view name,
    std::uint16_t port) const {
  std::vector<Entry> out;
  index.find(name, [&](const Entry& e) {
    if (port_ok(ports, e.port, port)) out.push_back(e);
    return false;  // visit them all
  });
  std::sort(out.begin(), out.end(), [](const Entry& a, const Entry& b) {
    return a.rule != b.rule ? a.rule < b.rule : a.pattern < b.pattern;
  });
  return out;
}

std::optional<Decision> CompiledRequestRules::decide(
    std::span<const CompiledRequestRules* const> layers, const std::vector<std::uint16_t>& ports,
    std::string_view name, std::uint16_t port, std::string_view method, std::string_view target) {
  std::vector<HttpMatch> http_named;
  std::vector<GitMatch> git_named;
  for (const CompiledRequestRules* layer : layers) {
    if (layer->http_.empty() && layer->git_.empty()) continue;
    for (const Entry& e : layer->named(layer->http_hosts_, ports, name, port)) {
      http_named.push_back({&layer->http_[e.rule]});
    }
    for (const Entry& e : layer->named(layer->git_hosts_, ports, name, port)) {
      const GitRule& rule = layer->git_[e.rule];
      git_named.push_back({&rule, &rule.repos[e.pattern]});
    }
  }
  if (http_named.empty() && git_named.empty()) return std::nullopt;

  const CanonicalPath path = canonicalize_path(target);
  GitRequest git = recognize_git(method, path.path, path.query);
  if (path.ambiguous) {
    // Enforced unless every rule naming the host is in audit mode.
    const bool enforce =
        std::any_of(http_named.begin(), http_named.end(),
                    [&](const HttpMatch& m) { return m.rule->mode == RuleMode::enforce; }) ||
        std::any_of(git_named.begin(), git_named.end(),
                    [&](const GitMatch& m) { return m.rule->mode == RuleMode::enforce; });
    Decision d = refusal(Reason::ambiguous_path, {}, !enforce);
    d.git = std::move(git);
    return d;
  }
  if (git.op != GitOperation::none && !git_named.empty()) {
    return decide_git(git_named, std::move(git));
  }
  if (http_named.empty()) return std::nullopt;  // not git, to a host only git rules name
  return decide_http(http_named, name, port, method, path.path);
}

Decision CompiledRequestRules::decide_git(const std::vector<GitMatch>& rules, GitRequest git) {
  const std::string repo = "/" + git.repo;
  for (const GitMatch& m : rules) {
    const GitRule& rule = *m.rule;
    const RepoPattern& pattern = *m.pattern;
    if (!pattern.path.matches(repo)) continue;
    const bool allowed = git.op == GitOperation::fetch ? rule.fetch : rule.push;
    std::string name = rule.origin + ":" + pattern.to_string();
    Decision d =
        allowed ? allowance(std::move(name))
                : refusal(Reason::git_not_allowed, std::move(name), rule.mode == RuleMode::audit);
    d.git = std::move(git);
    return d;
  }
  const bool enforce = std::any_of(rules.begin(), rules.end(), [&](const GitMatch& m) {
    return m.rule->mode == RuleMode::enforce;
  });
  Decision d = refusal(Reason::git_not_allowed, {}, !enforce);
  d.git = std::move(git);
  return d;
}

Decision CompiledRequestRules::decide_http(const std::vector<HttpMatch>& rules,
                                           std::string_view name, std::uint16_t port,
                                           std::string_view method, std::string_view path) {
  bool enforce = false;
  const HttpRule* last = nullptr;  // a rule naming the host twice is tried once
  for (const HttpMatch& m : rules) {
    if (m.rule == last) continue;
    last = m.rule;
    const HttpRule& rule = *m.rule;
    enforce = enforce || rule.mode == RuleMode::enforce;
    const bool method_ok =
        rule.methods.empty() ||
        std::find(rule.methods.begin(), rule.methods.end(), method) != rule.methods.end();
    if (!method_ok) continue;
    const bool path_ok =
        rule.paths.empty() || std::any_of(rule.paths.begin(), rule.paths.end(),
                                          [&](const PathGlob& g) { return g.matches(path); });
    if (!path_ok) continue;
    if (rule.allow) return allowance(rule.origin);
    return refusal(Reason::denied_by_http_rule, rule.origin, rule.mode == RuleMode::audit);
  }
  Decision d = refusal(Reason::no_matching_http_rule, {}, !enforce);
  d.suggestion = suggest_http_rule(name, port, method, path);
  return d;
}

}  // namespace detail

}  // namespace sandgate::policy
