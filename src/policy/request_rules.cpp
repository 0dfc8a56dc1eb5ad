#include "policy/request_rules.hpp"

#include <algorithm>

#include "common/ascii.hpp"
#include "policy/compiled_rules.hpp"

namespace sandgate::policy {

namespace {

std::string lowercase(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), lower_ascii);
  return out;
}

std::string uppercase(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](char c) {
    return c >= 'a' && c <= 'z' ? static_cast<char>(c - 'a' + 'A') : c;
  });
  return out;
}

// Every %XX decoded (an invalid escape is kept), for query parameter names and values.
std::string percent_decoded(std::string_view s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && hex_value(s[i + 1]) >= 0 && hex_value(s[i + 2]) >= 0) {
      out += static_cast<char>(hex_value(s[i + 1]) * 16 + hex_value(s[i + 2]));
      i += 2;
    } else {
      out += s[i] == '+' ? ' ' : s[i];
    }
  }
  return out;
}

// Calls f(name, value) for each `name=value` parameter of `query`, both still percent-encoded;
// a parameter without '=' is skipped.
template <class F>
void for_each_param(std::string_view query, F f) {
  for (std::string_view rest = query; !rest.empty();) {
    const auto amp = rest.find('&');
    const std::string_view param = rest.substr(0, amp);
    rest = amp == std::string_view::npos ? std::string_view() : rest.substr(amp + 1);
    const auto eq = param.find('=');
    if (eq != std::string_view::npos) f(param.substr(0, eq), param.substr(eq + 1));
  }
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

namespace {

// The git operation a smart info/refs query asks for: its `service` parameters,
// percent-decoded; when one of them is git-receive-pack, a push. none without a known one.
GitOperation smart_service(std::string_view query) {
  bool upload = false;
  bool receive = false;
  for_each_param(query, [&](std::string_view name, std::string_view value) {
    if (percent_decoded(name) != "service") return;
    const std::string service = percent_decoded(value);
    upload = upload || service == "git-upload-pack";
    receive = receive || service == "git-receive-pack";
  });
  return receive ? GitOperation::push : upload ? GitOperation::fetch : GitOperation::none;
}

bool is_hex_pair(std::string_view s) {
  return s.size() == 2 && std::all_of(s.begin(), s.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

// The repository part of a path into a repository's files, as dumb HTTP reads them and
// WebDAV writes them (`p` lowercased, no trailing '/'): what comes before the first
// objects/{XX,info,pack} or refs/{heads,tags}, or before a last info/refs, HEAD or
// packed-refs. nullopt for any other path. Runs on every request to a host git rules name,
// so it walks the segments in place.
std::optional<std::string_view> dumb_repository(std::string_view p) {
  if (p.empty() || p.front() != '/') return std::nullopt;
  // Each segment with the one after it; `at` is where the segment starts.
  for (std::size_t at = 1; at < p.size();) {
    const std::size_t end = std::min(p.find('/', at), p.size());
    if (end == p.size()) break;  // the last segment: nothing after it
    const std::string_view segment = p.substr(at, end - at);
    const std::size_t next_end = std::min(p.find('/', end + 1), p.size());
    const std::string_view next = p.substr(end + 1, next_end - end - 1);
    if ((segment == "objects" && (is_hex_pair(next) || next == "info" || next == "pack")) ||
        (segment == "refs" && (next == "heads" || next == "tags"))) {
      return p.substr(0, at - 1);
    }
    at = end + 1;
  }
  if (p.ends_with("/info/refs"))
    return p.substr(0, p.size() - std::string_view("/info/refs").size());
  const std::size_t last = p.rfind('/');
  const std::string_view name = p.substr(last + 1);
  if (name == "head" || name == "packed-refs") return p.substr(0, last);
  return std::nullopt;
}

}  // namespace

GitRequest recognize_git(std::string_view method, std::string_view path, std::string_view query) {
  // Case-insensitive on purpose: a server that takes "post" or ".../INFO/REFS" must not turn
  // a push into a request the git rules never see.
  std::string lowered = lowercase(path);
  while (lowered.size() > 1 && lowered.back() == '/') lowered.pop_back();
  const std::string_view p = lowered;
  // HEAD is a GET without the body (the same handler serves it).
  const bool read = iequals_ascii(method, "GET") || iequals_ascii(method, "HEAD");
  GitRequest g;
  std::string_view repo;
  const GitOperation service =
      read && p.ends_with("/info/refs") ? smart_service(query) : GitOperation::none;
  if (service != GitOperation::none) {
    g.op = service;
    g.advertisement = iequals_ascii(method, "GET");
    repo = p.substr(0, p.size() - std::string_view("/info/refs").size());
  } else if (iequals_ascii(method, "POST") && p.ends_with("/git-upload-pack")) {
    g.op = GitOperation::fetch;
    repo = p.substr(0, p.size() - std::string_view("/git-upload-pack").size());
  } else if (iequals_ascii(method, "POST") && p.ends_with("/git-receive-pack")) {
    g.op = GitOperation::push;
    repo = p.substr(0, p.size() - std::string_view("/git-receive-pack").size());
  } else if (const auto files = dumb_repository(p)) {
    // Every path into a repository's files is that repository's: read, a fetch; anything
    // else (WebDAV's PUT, MOVE, MKCOL, LOCK, PROPFIND), a push.
    g.op = read ? GitOperation::fetch : GitOperation::push;
    g.dumb = true;
    repo = *files;
  } else {
    return g;
  }
  g.repo = normalize_repo(repo);
  return g;
}

bool host_ignores_path_case(std::string_view name) {
  return name == "github.com" || name.ends_with(".github.com");
}

std::vector<std::string> request_methods(std::string_view method,
                                         std::span<const std::string_view> override_values,
                                         std::string_view query) {
  std::vector<std::string> out = {uppercase(method)};
  const auto add_list = [&](std::string_view list) {
    for (std::string_view rest = list; !rest.empty();) {
      const auto comma = rest.find(',');
      const std::string_view one = trim_ows(rest.substr(0, comma));
      rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
      if (one.empty()) continue;
      std::string upper = uppercase(one);
      if (std::find(out.begin(), out.end(), upper) == out.end()) out.push_back(std::move(upper));
    }
  };
  for (const std::string_view v : override_values) add_list(v);
  for_each_param(query, [&](std::string_view encoded_name, std::string_view value) {
    // PHP turns a leading '.', ' ' or '[' of a parameter name into '_': ".method" is
    // Laravel's and Symfony's "_method" too.
    const std::string name = percent_decoded(encoded_name);
    if (name.size() == 7 && name.ends_with("method") &&
        std::string_view("_. [").find(name.front()) != std::string_view::npos) {
      add_list(percent_decoded(value));
    }
  });
  return out;
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
      return fail("methods are written in uppercase (a rule matches any case); write \"" +
                  uppercase(method) + "\"");
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
    std::string_view name, std::uint16_t port, std::string_view method, std::string_view target,
    std::span<const std::string_view> method_overrides) {
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
  // Only a refusal of an ambiguous path and the git rules read it (a host only http rules
  // name does not pay for it).
  GitRequest git = path.ambiguous || !git_named.empty()
                       ? recognize_git(method, path.path, path.query)
                       : GitRequest{};
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
  // Nearly every request: one method, in uppercase, and no override anywhere (request_methods
  // would say just that, with an allocation or two).
  const bool plain =
      method_overrides.empty() && path.query.find("method") == std::string_view::npos &&
      path.query.find('%') == std::string_view::npos &&
      std::none_of(method.begin(), method.end(), [](char c) { return c >= 'a' && c <= 'z'; });
  if (plain) return decide_http(http_named, name, method, path.path);
  // The request must pass the rules as the method it was sent with and as every method an
  // override asks for; the first enforced refusal decides, then the first audited one.
  std::optional<Decision> allowed;
  std::optional<Decision> audited;
  for (const std::string& m : request_methods(method, method_overrides, path.query)) {
    Decision d = decide_http(http_named, name, m, path.path);
    if (!d.allowed) return d;
    if (d.audit) {
      if (!audited) audited = std::move(d);
    } else if (!allowed) {
      allowed = std::move(d);
    }
  }
  return audited ? std::move(*audited) : std::move(*allowed);
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
                                           std::string_view name, std::string_view method,
                                           std::string_view path) {
  const PathCase host_case =
      host_ignores_path_case(name) ? PathCase::insensitive : PathCase::sensitive;
  bool enforce = false;
  const HttpRule* last = nullptr;  // a rule naming the host twice is tried once
  for (const HttpMatch& m : rules) {
    if (m.rule == last) continue;
    last = m.rule;
    const HttpRule& rule = *m.rule;
    enforce = enforce || rule.mode == RuleMode::enforce;
    // `method` is uppercase, as a rule's are; a GET rule covers HEAD, which origins serve with
    // the GET handler.
    const auto names = [&](std::string_view listed) {
      return std::find(rule.methods.begin(), rule.methods.end(), listed) != rule.methods.end();
    };
    const bool method_ok =
        rule.methods.empty() || names(method) || (method == "HEAD" && names("GET"));
    if (!method_ok) continue;
    const PathCase path_case = rule.path_case.value_or(host_case);
    const bool path_ok = rule.paths.empty() ||
                         std::any_of(rule.paths.begin(), rule.paths.end(),
                                     [&](const PathGlob& g) { return g.matches(path, path_case); });
    if (!path_ok) continue;
    if (rule.allow) return allowance(rule.origin);
    return refusal(Reason::denied_by_http_rule, rule.origin, rule.mode == RuleMode::audit);
  }
  Decision d = refusal(Reason::no_matching_http_rule, {}, !enforce);
  d.refused_method = method;
  d.refused_path = path;
  return d;
}

}  // namespace detail

}  // namespace sandgate::policy
