#pragma once

// Method, path and git rules (docs/policy.md, "Requests inside intercepted streams"): what
// config builds (HttpRule, GitRule) and what decide_request learns about a git request.

#include <array>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "policy/host_pattern.hpp"
#include "policy/path.hpp"

namespace sandgate::policy {

// enforce: a refusal refuses. audit: the request goes through, and the Decision says what
// would have refused it (Decision::audit), so an operator can roll a rule out safely.
enum class RuleMode { enforce, audit };

// One [[...http_rules]] entry. Rules are tried in order (the profile's, then the sandbox's);
// the first whose hosts, methods and paths all match the request decides.
struct HttpRule {
  std::vector<HostPattern> hosts;  // ports as in `allow`
  // Empty: any method. Uppercase tokens, matched by a method in any case; "GET" also matches
  // HEAD (origins serve HEAD with the GET handler).
  std::vector<std::string> methods;
  std::vector<PathGlob> paths;  // empty: any path
  // nullopt: the request's host decides (host_ignores_path_case).
  std::optional<PathCase> path_case;
  bool allow = false;  // action: "allow" or "deny"
  RuleMode mode = RuleMode::enforce;
  std::string origin;  // e.g. "profiles.default.http_rules[0]", for Decision::rule
};

// Whether an http rule without `path_case` matches paths to this host (a normalised name)
// without case: github.com and its subdomains (api.github.com, ...), which resolve owners and
// repositories in any case, so "/repos/ACME/x" is "/repos/acme/x" there.
bool host_ignores_path_case(std::string_view name);

// The header fields that ask an origin to act as another method (Google APIs, Symfony,
// Laravel, Express's method-override). The proxy passes their values to decide_request.
inline constexpr std::array<std::string_view, 3> kMethodOverrideFields = {
    "X-HTTP-Method-Override", "X-HTTP-Method", "X-Method-Override"};

// The methods the http rules decide a request on: the one sent, then every method an
// override asks for (each value of `override_values`, split at commas, and each `_method`
// parameter of the raw query, percent-decoded), all in uppercase, without repeats or empty
// ones. The request must pass the rules as each of them.
std::vector<std::string> request_methods(std::string_view method,
                                         std::span<const std::string_view> override_values,
                                         std::string_view query);

// "github.com/acme/*": the host (a host pattern, ports as in `allow`) and a glob over the
// repository path (lowercase, no trailing ".git" or '/').
struct RepoPattern {
  HostPattern host;
  PathGlob path;
  std::string to_string() const;  // canonical text, e.g. "github.com/acme/*"
};
std::optional<RepoPattern> parse_repo_pattern(std::string_view text, std::string* error = nullptr);

// One [[...git]] entry: which operations over smart HTTP its repositories allow.
struct GitRule {
  std::vector<RepoPattern> repos;
  bool fetch = false;
  bool push = false;
  RuleMode mode = RuleMode::enforce;
  std::string origin;  // e.g. "sandboxes.ci.git[1]"
};

enum class GitOperation { none, fetch, push };
std::string_view git_operation_name(GitOperation op);  // "none", "fetch", "push"

// A request recognised as git. Smart HTTP: GET (or HEAD) <repo>/info/refs?service=
// git-upload-pack (fetch) or ...=git-receive-pack (push), POST <repo>/git-upload-pack (fetch)
// or <repo>/git-receive-pack (push). Dumb HTTP (`dumb`), a path into the repository's files:
// <repo>/info/refs without a smart service, <repo>/HEAD, <repo>/packed-refs,
// <repo>/objects/{XX,info,pack}/..., <repo>/refs/{heads,tags}/...; a GET or HEAD of one is a
// fetch, any other method (WebDAV, which dumb push uses) a push. `advertisement` marks the
// smart info/refs GET: git shows a refusal of it best as a 200 reply of type
// application/x-<service>-advertisement holding one pkt-line "ERR <message>", which git prints
// as the remote's message.
struct GitRequest {
  GitOperation op = GitOperation::none;
  bool advertisement = false;
  bool dumb = false;
  std::string repo;  // normalised repository path: "acme/widget" (lowercase, no ".git")

  std::string_view service() const;  // "git-upload-pack", "git-receive-pack", or ""
};

// Recognises a git request from its method and canonical path, and the raw query (only its
// `service` parameters are read; when several are given and one is git-receive-pack, it is a
// push). Method and path are compared without case. op is none for anything else.
GitRequest recognize_git(std::string_view method, std::string_view canonical_path,
                         std::string_view query);

// An HTTP method token (RFC 9110 5.6.2 tchar), written in uppercase (one spelling in config,
// logs and suggestions; a rule matches the method in any case). False and a reason in *error
// otherwise.
bool valid_rule_method(std::string_view method, std::string* error = nullptr);

}  // namespace sandgate::policy
