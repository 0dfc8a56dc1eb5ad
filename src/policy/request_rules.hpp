#pragma once

// Method, path and git rules (docs/policy.md, "Requests inside intercepted streams"): what
// config builds (HttpRule, GitRule) and what decide_request learns about a git request.

#include <optional>
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
  std::vector<HostPattern> hosts;    // ports as in `allow`
  std::vector<std::string> methods;  // empty: any method; compared case-sensitively
  std::vector<PathGlob> paths;       // empty: any path
  bool allow = false;                // action: "allow" or "deny"
  RuleMode mode = RuleMode::enforce;
  std::string origin;  // e.g. "profiles.default.http_rules[0]", for Decision::rule
};

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

// A request recognised as git over smart HTTP: GET <repo>/info/refs?service=git-upload-pack
// (fetch) or ...=git-receive-pack (push), POST <repo>/git-upload-pack (fetch) or
// <repo>/git-receive-pack (push). `advertisement` marks the info/refs GET: git shows a refusal
// of it best as a 200 reply of type application/x-<service>-advertisement holding one pkt-line
// "ERR <message>", which git prints as the remote's message.
struct GitRequest {
  GitOperation op = GitOperation::none;
  bool advertisement = false;
  std::string repo;  // normalised repository path: "acme/widget" (lowercase, no ".git")

  std::string_view service() const;  // "git-upload-pack", "git-receive-pack", or ""
};

// Recognises a git request from its method and canonical path, and the raw query (only its
// `service` parameters are read; when several are given and one is git-receive-pack, it is a
// push). op is none for anything else (including git's old "dumb" protocol, plain GETs).
GitRequest recognize_git(std::string_view method, std::string_view canonical_path,
                         std::string_view query);

// An HTTP method token (RFC 9110 5.6.2 tchar), in uppercase: methods are case-sensitive and
// a rule for "get" would match nothing. nullopt-like false and a reason in *error otherwise.
bool valid_rule_method(std::string_view method, std::string* error = nullptr);

}  // namespace sandgate::policy
