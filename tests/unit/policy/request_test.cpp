// decide_request with method, path and git rules, and Policy::inspects: one table of
// requests to one decision each, no sockets. Encoded-path tricks (THREATS 12) have rows here
// and in path_test.cpp.
#include "policy/request.hpp"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

namespace sandgate::policy {
namespace {

HostPattern host(const char* text) {
  return *parse_host_pattern(text);
}
PathGlob glob(const char* text) {
  return *PathGlob::parse(text);
}
RepoPattern repo(const char* text) {
  return *parse_repo_pattern(text);
}

HttpRule http_rule(std::vector<HostPattern> hosts, std::vector<std::string> methods,
                   std::vector<PathGlob> paths, bool allow, RuleMode mode, std::size_t index) {
  HttpRule r;
  r.hosts = std::move(hosts);
  r.methods = std::move(methods);
  r.paths = std::move(paths);
  r.allow = allow;
  r.mode = mode;
  r.origin = "sandboxes.web.http_rules[" + std::to_string(index) + "]";
  return r;
}

GitRule git_rule(std::vector<RepoPattern> repos, bool fetch, bool push, RuleMode mode,
                 std::size_t index) {
  GitRule r;
  r.repos = std::move(repos);
  r.fetch = fetch;
  r.push = push;
  r.mode = mode;
  r.origin = "sandboxes.web.git[" + std::to_string(index) + "]";
  return r;
}

std::shared_ptr<const Policy> make_policy() {
  SandboxSpec web;
  web.id = "web";
  web.ports = {443, 8443};
  for (const char* a : {"api.github.com", "github.com", "*.example.com", "plain.test", "audit.test",
                        "gitaudit.test"}) {
    web.allow.push_back({host(a), "sandboxes.web.allow"});
  }
  web.inspect = {{host("inspect-only.example.com"), "sandboxes.web.inspect"},
                 {host("*.deep.example.com:8443"), "sandboxes.web.inspect"}};
  using M = RuleMode;
  web.http_rules = {
      http_rule({host("api.github.com")}, {"GET", "HEAD"}, {glob("/repos/acme/**")}, true,
                M::enforce, 0),
      http_rule({host("api.github.com")}, {"POST"}, {glob("/repos/acme/*/issues")}, true,
                M::enforce, 1),
      http_rule({host("api.github.com")}, {}, {glob("/admin/**")}, false, M::enforce, 2),
      http_rule({host("audit.test")}, {"DELETE"}, {}, false, M::audit, 3),
      http_rule({host("audit.test")}, {}, {glob("/ok/**")}, true, M::audit, 4),
      http_rule({host("svc.example.com:8443")}, {}, {glob("/v1/**"), glob("/v2/*")}, true,
                M::enforce, 5),
  };
  web.git_rules = {
      git_rule({repo("github.com/acme/*")}, true, false, M::enforce, 0),
      git_rule({repo("gitaudit.test/nothing"), repo("github.com/Acme-Open/**")}, true, true,
               M::enforce, 1),
      git_rule({repo("gitaudit.test/x/*")}, true, false, M::audit, 2),
  };
  return std::make_shared<const Policy>(std::vector<SandboxSpec>{web}, std::vector<Endpoint>{});
}

struct Row {
  const char* name;
  const char* host;
  std::uint16_t port;
  const char* method;
  const char* target;
  bool allowed;
  Reason reason;
  const char* rule;
  bool audit = false;
  GitOperation git = GitOperation::none;
  const char* repo = "";
};

void PrintTo(const Row& row, std::ostream* os) {
  *os << row.name;
}

class DecideRequestRules : public testing::TestWithParam<Row> {};

TEST_P(DecideRequestRules, OneDecisionPerRequest) {
  static const auto policy = make_policy();
  const Row& row = GetParam();
  const Host h = normalize_host(row.host);
  RequestFacts f;
  f.sandbox = "web";
  f.host = &h;
  f.port = row.port;
  f.method = row.method;
  f.path = row.target;
  const Decision d = decide_request(*policy, f);
  EXPECT_EQ(d.allowed, row.allowed);
  EXPECT_EQ(reason_name(d.reason), reason_name(row.reason));
  EXPECT_EQ(d.rule, row.rule);
  EXPECT_EQ(d.audit, row.audit);
  EXPECT_EQ(git_operation_name(d.git.op), git_operation_name(row.git));
  EXPECT_EQ(d.git.repo, row.repo);
}

using R = Reason;
using G = GitOperation;
constexpr const char* kGet = "GET";
constexpr const char* kPost = "POST";
const char* const kAllowApi = "sandboxes.web.allow:api.github.com";

INSTANTIATE_TEST_SUITE_P(
    HttpRules, DecideRequestRules,
    testing::Values(
        Row{"first_rule_allows", "api.github.com", 443, kGet, "/repos/acme/widget", true,
            R::allowed_by_rule, "sandboxes.web.http_rules[0]"},
        Row{"subtree_root_matches", "api.github.com", 443, kGet, "/repos/acme", true,
            R::allowed_by_rule, "sandboxes.web.http_rules[0]"},
        Row{"second_method_of_rule", "api.github.com", 443, "HEAD", "/repos/acme/x/y", true,
            R::allowed_by_rule, "sandboxes.web.http_rules[0]"},
        Row{"query_is_not_matched", "api.github.com", 443, kGet, "/repos/acme/x?a=%2F&b=..", true,
            R::allowed_by_rule, "sandboxes.web.http_rules[0]"},
        Row{"rule_port_from_sandbox_ports", "api.github.com", 8443, kGet, "/repos/acme/x", true,
            R::allowed_by_rule, "sandboxes.web.http_rules[0]"},
        Row{"later_rule_allows", "api.github.com", 443, kPost, "/repos/acme/widget/issues", true,
            R::allowed_by_rule, "sandboxes.web.http_rules[1]"},
        Row{"no_rule_for_path", "api.github.com", 443, kGet, "/repos/other/x", false,
            R::no_matching_http_rule, ""},
        Row{"no_rule_for_method", "api.github.com", 443, "DELETE", "/repos/acme/widget", false,
            R::no_matching_http_rule, ""},
        Row{"methods_are_case_sensitive", "api.github.com", 443, "get", "/repos/acme/x", false,
            R::no_matching_http_rule, ""},
        Row{"post_off_its_path", "api.github.com", 443, kPost, "/repos/acme/widget/pulls", false,
            R::no_matching_http_rule, ""},
        Row{"deny_rule", "api.github.com", 443, kGet, "/admin/users", false, R::denied_by_http_rule,
            "sandboxes.web.http_rules[2]"},
        Row{"dot_segments_reach_the_deny_rule", "api.github.com", 443, kGet,
            "/repos/acme/../../admin/users", false, R::denied_by_http_rule,
            "sandboxes.web.http_rules[2]"},
        Row{"encoded_dot_segments_leave_the_subtree", "api.github.com", 443, kGet,
            "/repos/acme/%2e%2e/other", false, R::no_matching_http_rule, ""},
        Row{"encoded_unreserved_matches", "api.github.com", 443, kGet, "/%72epos/acme/x", true,
            R::allowed_by_rule, "sandboxes.web.http_rules[0]"},
        Row{"encoded_slash_is_ambiguous", "api.github.com", 443, kGet, "/repos/acme%2F..%2Fx",
            false, R::ambiguous_path, ""},
        Row{"semicolon_is_ambiguous", "api.github.com", 443, kGet, "/admin;x/users", false,
            R::ambiguous_path, ""},
        Row{"backslash_is_ambiguous", "api.github.com", 443, kGet, "/repos/acme/..\\admin", false,
            R::ambiguous_path, ""},
        Row{"double_slash_is_ambiguous", "api.github.com", 443, kGet, "//admin/users", false,
            R::ambiguous_path, ""},
        Row{"host_without_rules_is_unaffected", "plain.test", 443, kGet, "/a%2Fb;c\\d", true,
            R::allowed_by_rule, "sandboxes.web.allow:plain.test"},
        Row{"host_rules_come_first", "nope.test", 443, kGet, "/", false, R::no_matching_rule, ""},
        Row{"host_rule_port_first", "api.github.com", 80, kGet, "/repos/acme/x", false,
            R::port_not_allowed, kAllowApi},
        Row{"rule_with_port_names_only_that_port", "svc.example.com", 443, kPost, "/anything", true,
            R::allowed_by_rule, "sandboxes.web.allow:*.example.com"},
        Row{"rule_with_port", "svc.example.com", 8443, kPost, "/v1/a/b", true, R::allowed_by_rule,
            "sandboxes.web.http_rules[5]"},
        Row{"second_path_of_rule", "svc.example.com", 8443, kGet, "/v2/a", true, R::allowed_by_rule,
            "sandboxes.web.http_rules[5]"},
        Row{"rule_with_port_refuses_other_paths", "svc.example.com", 8443, kGet, "/v2/a/b", false,
            R::no_matching_http_rule, ""},
        // Audit mode: allowed, and the decision says what would have refused it.
        Row{"audit_deny_rule", "audit.test", 443, "DELETE", "/x", true, R::denied_by_http_rule,
            "sandboxes.web.http_rules[3]", true},
        Row{"audit_no_match", "audit.test", 443, kGet, "/nope", true, R::no_matching_http_rule, "",
            true},
        Row{"audit_allow_is_an_allow", "audit.test", 443, kGet, "/ok/1", true, R::allowed_by_rule,
            "sandboxes.web.http_rules[4]"},
        Row{"audit_ambiguous", "audit.test", 443, kGet, "/ok/a%2Fb", true, R::ambiguous_path, "",
            true}));

constexpr const char* kAcme0 = "sandboxes.web.git[0]:github.com/acme/*";
constexpr const char* kOpen1 = "sandboxes.web.git[1]:github.com/acme-open/**";

INSTANTIATE_TEST_SUITE_P(
    GitRules, DecideRequestRules,
    testing::Values(
        Row{"fetch_advertisement_allowed", "github.com", 443, kGet,
            "/acme/widget.git/info/refs?service=git-upload-pack", true, R::allowed_by_rule, kAcme0,
            false, G::fetch, "acme/widget"},
        Row{"fetch_rpc_allowed", "github.com", 443, kPost, "/acme/widget.git/git-upload-pack", true,
            R::allowed_by_rule, kAcme0, false, G::fetch, "acme/widget"},
        Row{"push_advertisement_refused", "github.com", 443, kGet,
            "/acme/widget/info/refs?service=git-receive-pack", false, R::git_not_allowed, kAcme0,
            false, G::push, "acme/widget"},
        Row{"push_rpc_refused", "github.com", 443, kPost, "/acme/widget.git/git-receive-pack",
            false, R::git_not_allowed, kAcme0, false, G::push, "acme/widget"},
        Row{"repo_case_and_dot_git_ignored", "github.com", 443, kGet,
            "/ACME/Widget.GIT/info/refs?service=git-upload-pack", true, R::allowed_by_rule, kAcme0,
            false, G::fetch, "acme/widget"},
        Row{"trailing_slash_ignored", "github.com", 443, kPost, "/acme/widget/git-receive-pack/",
            false, R::git_not_allowed, kAcme0, false, G::push, "acme/widget"},
        Row{"lowercase_post_is_still_a_push", "github.com", 443, "post",
            "/acme/widget/git-receive-pack", false, R::git_not_allowed, kAcme0, false, G::push,
            "acme/widget"},
        Row{"any_receive_pack_service_is_a_push", "github.com", 443, kGet,
            "/acme/widget/info/refs?service=git-upload-pack&service=git-receive-pack", false,
            R::git_not_allowed, kAcme0, false, G::push, "acme/widget"},
        Row{"encoded_service_is_decoded", "github.com", 443, kGet,
            "/acme/widget/info/refs?%73ervice=git%2Dreceive-pack", false, R::git_not_allowed,
            kAcme0, false, G::push, "acme/widget"},
        Row{"nested_repo_push_allowed", "github.com", 443, kPost,
            "/acme-open/group/tool.git/git-receive-pack", true, R::allowed_by_rule, kOpen1, false,
            G::push, "acme-open/group/tool"},
        Row{"no_repo_pattern_matches", "github.com", 443, kGet,
            "/other/x/info/refs?service=git-upload-pack", false, R::git_not_allowed, "", false,
            G::fetch, "other/x"},
        Row{"wildcard_is_one_segment", "github.com", 443, kPost, "/acme/widget/sub/git-upload-pack",
            false, R::git_not_allowed, "", false, G::fetch, "acme/widget/sub"},
        Row{"dot_segments_before_recognition", "github.com", 443, kPost,
            "/other/x/../../acme/widget/git-receive-pack", false, R::git_not_allowed, kAcme0, false,
            G::push, "acme/widget"},
        Row{"ambiguous_git_path", "github.com", 443, kGet,
            "/acme/w%2F..%2F..%2Fother/x/info/refs?service=git-upload-pack", false,
            R::ambiguous_path, "", false, G::fetch, "acme/w%2f..%2f..%2fother/x"},
        Row{"ambiguous_non_git_path_on_a_git_host", "github.com", 443, kPost,
            "/acme/widget/git-receive-pack;x", false, R::ambiguous_path, ""},
        Row{"non_git_request_left_to_host_rules", "github.com", 443, kGet, "/acme/widget", true,
            R::allowed_by_rule, "sandboxes.web.allow:github.com"},
        Row{"dumb_protocol_is_not_smart_git", "github.com", 443, kGet, "/acme/widget/info/refs",
            true, R::allowed_by_rule, "sandboxes.web.allow:github.com"},
        Row{"unknown_service_is_not_smart_git", "github.com", 443, kGet,
            "/acme/widget/info/refs?service=git-upload-archive", true, R::allowed_by_rule,
            "sandboxes.web.allow:github.com"},
        Row{"audit_push_refusal", "gitaudit.test", 443, kPost, "/x/y/git-receive-pack", true,
            R::git_not_allowed, "sandboxes.web.git[2]:gitaudit.test/x/*", true, G::push, "x/y"},
        Row{"audit_rule_fetch_allowed", "gitaudit.test", 443, kPost, "/x/y/git-upload-pack", true,
            R::allowed_by_rule, "sandboxes.web.git[2]:gitaudit.test/x/*", false, G::fetch, "x/y"},
        Row{"no_match_with_an_enforce_rule", "gitaudit.test", 443, kPost,
            "/other/y/git-upload-pack", false, R::git_not_allowed, "", false, G::fetch, "other/y"},
        Row{"second_pattern_of_a_rule", "gitaudit.test", 443, kPost, "/nothing/git-receive-pack",
            true, R::allowed_by_rule, "sandboxes.web.git[1]:gitaudit.test/nothing", false, G::push,
            "nothing"}));

// THREATS 23: "no push" in git rules does not stop writes through the API; the API host's
// own http rules must. Both doors, one sandbox.
TEST(DecideRequest, GitRulesAndApiRulesAreTwoDoors) {
  const auto policy = make_policy();
  const Host github = normalize_host("github.com");
  const Host api = normalize_host("api.github.com");
  const auto decide = [&](const Host& h, const char* method, const char* target) {
    RequestFacts f;
    f.sandbox = "web";
    f.host = &h;
    f.port = 443;
    f.method = method;
    f.path = target;
    return decide_request(*policy, f);
  };
  EXPECT_EQ(decide(github, "POST", "/acme/widget.git/git-receive-pack").reason,
            Reason::git_not_allowed);
  // The contents API writes a file: refused by api.github.com's http rules, not the git rules.
  const Decision put = decide(api, "PUT", "/repos/acme/widget/contents/README.md");
  EXPECT_FALSE(put.allowed);
  EXPECT_EQ(put.reason, Reason::no_matching_http_rule);
  EXPECT_EQ(put.git.op, GitOperation::none);
  EXPECT_TRUE(decide(api, "GET", "/repos/acme/widget/contents/README.md").allowed);
}

// THREATS 14, 17 and 19: inside an intercepted stream every request is decided on its own
// authority, which must be the intercepted name and port.
TEST(DecideRequest, InterceptedStreamsCarryOnlyTheirOwnName) {
  const auto policy = make_policy();
  const Host api = normalize_host("api.github.com");
  const Host github = normalize_host("github.com");
  const Host literal = normalize_host("140.82.112.3");
  struct Case {
    const char* name;
    const Host* host;
    std::uint16_t port;
    bool connect;
    bool allowed;
    Reason reason;
  };
  const Case cases[] = {
      {"same_name_and_port", &api, 443, false, true, Reason::allowed_by_rule},
      {"other_allowed_host", &github, 443, false, false, Reason::misdirected_request},
      {"other_port", &api, 8443, false, false, Reason::misdirected_request},
      {"an_address", &literal, 443, false, false, Reason::misdirected_request},
      {"nested_proxy_first", &github, 443, true, false, Reason::nested_proxy},
  };
  for (const Case& c : cases) {
    RequestFacts f;
    f.sandbox = "web";
    f.host = c.host;
    f.port = c.port;
    f.method = "GET";
    f.path = "/repos/acme/x";
    f.connect_to_origin = c.connect;
    f.intercepted = &api;
    f.intercepted_port = 443;
    const Decision d = decide_request(*policy, f);
    EXPECT_EQ(d.allowed, c.allowed) << c.name;
    EXPECT_EQ(reason_name(d.reason), reason_name(c.reason)) << c.name;
  }
}

TEST(Inspects, InspectPatternsAndEveryRuleHost) {
  const auto policy = make_policy();
  struct Case {
    const char* sandbox;
    const char* host;
    std::uint16_t port;
    bool inspected;
  };
  const Case cases[] = {
      {"web", "api.github.com", 443, true},            // http rule, the sandbox's ports
      {"web", "api.github.com", 8443, true},           //
      {"web", "api.github.com", 80, false},            // not one of its ports
      {"web", "github.com", 443, true},                // git rule
      {"web", "gitaudit.test", 443, true},             // second pattern of a git rule
      {"web", "audit.test", 443, true},                // audit-mode rules too
      {"web", "inspect-only.example.com", 443, true},  // inspect
      {"web", "x.deep.example.com", 8443, true},       // inspect with its own port
      {"web", "a.b.deep.example.com", 8443, true},     //
      {"web", "x.deep.example.com", 443, false},       //
      {"web", "deep.example.com", 8443, false},        // a wildcard is not the apex
      {"web", "svc.example.com", 8443, true},          // http rule with its own port
      {"web", "svc.example.com", 443, false},          //
      {"web", "plain.test", 443, false},               // allowed, no rule
      {"web", "API.GitHub.com.", 443, true},           // normalised
      {"web", "140.82.112.3", 443, false},             // addresses never
      {"nope", "api.github.com", 443, false},          // unknown sandbox
  };
  for (const Case& c : cases) {
    EXPECT_EQ(policy->inspects(c.sandbox, normalize_host(c.host), c.port), c.inspected)
        << c.sandbox << " " << c.host << ":" << c.port;
  }
}

TEST(SuggestRule, GitRefusalWithoutAMatchingRepoSuggestsAGitRule) {
  const auto policy = make_policy();
  const Host github = normalize_host("github.com");
  RequestFacts f;
  f.sandbox = "web";
  f.host = &github;
  f.port = 443;
  f.method = "GET";
  f.path = "/Other/Tool.git/info/refs?service=git-receive-pack";
  const Decision unmatched = decide_request(*policy, f);
  ASSERT_EQ(unmatched.reason, Reason::git_not_allowed);
  EXPECT_TRUE(unmatched.git.advertisement);
  EXPECT_EQ(unmatched.git.service(), "git-receive-pack");
  EXPECT_EQ(suggest_rule(unmatched, github, 443),
            "git = [{ repos = [\"github.com/other/tool\"], allow = [\"push\"] }]");
  EXPECT_EQ(suggest_rule(unmatched, github, 8443),
            "git = [{ repos = [\"github.com:8443/other/tool\"], allow = [\"push\"] }]");
  // A repository a rule matched: a later rule would never be read, so no suggestion.
  f.path = "/acme/widget/info/refs?service=git-receive-pack";
  const Decision matched = decide_request(*policy, f);
  ASSERT_EQ(matched.reason, Reason::git_not_allowed);
  EXPECT_EQ(suggest_rule(matched, github, 443), "");
}

TEST(SuggestRule, RequestNoRuleMatchedSuggestsAnHttpRule) {
  const auto policy = make_policy();
  const Host api = normalize_host("api.github.com");
  const auto suggestion = [&](const char* method, const char* target, std::uint16_t port) {
    RequestFacts f;
    f.sandbox = "web";
    f.host = &api;
    f.port = port;
    f.method = method;
    f.path = target;
    return suggest_rule(decide_request(*policy, f), api, port);
  };
  EXPECT_EQ(suggestion("DELETE", "/repos/acme/%7ex/./y?q=1", 443),
            "http_rules = [{ hosts = [\"api.github.com\"], methods = [\"DELETE\"], paths = "
            "[\"/repos/acme/~x/y\"], action = \"allow\" }]");
  EXPECT_EQ(suggestion("PUT", "/", 8443),
            "http_rules = [{ hosts = [\"api.github.com:8443\"], methods = [\"PUT\"], paths = "
            "[\"/\"], action = \"allow\" }]");
  EXPECT_EQ(suggestion("get", "/x", 443), "");            // config would refuse the method
  EXPECT_EQ(suggestion("GET", "/repos/a*b", 443), "");    // a glob would read '*' as a wildcard
  EXPECT_EQ(suggestion("GET", "/admin/users", 443), "");  // a deny rule decided: it stays first
  EXPECT_EQ(suggestion("GET", "/repos/a%2Fb", 443), "");  // ambiguous: no rule can allow it
}

TEST(RepoPattern, ParsesHostAndRepositoryGlob) {
  const auto p = parse_repo_pattern("GitHub.com/Acme/*.git");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->to_string(), "github.com/acme/*");
  const auto ported = parse_repo_pattern("git.example.com:8443/a/**");
  ASSERT_TRUE(ported);
  EXPECT_EQ(ported->to_string(), "git.example.com:8443/a/**");
  for (const char* bad :
       {"github.com", "github.com/", "/acme/x", "*/acme", "github.com/a//b", "github.com/a/../b",
        "1.2.3.4/acme/x", "github.com//", "github.com/a.git.git"}) {
    std::string error;
    EXPECT_FALSE(parse_repo_pattern(bad, &error)) << bad;
    EXPECT_FALSE(error.empty()) << bad;
  }
}

// Escapes are decoded before the lowering and the ".git" step, so a pattern's text names the
// repository it matches and parses back to itself (path_fuzz found "%54" and "%2e" not to).
TEST(RepoPattern, EscapesAreDecodedBeforeLoweringAndTheGitSuffix) {
  const std::pair<const char*, const char*> rows[] = {
      {"github.com/acme/%57idget", "github.com/acme/widget"},
      {"github.com/Acme/Widget%2Egit", "github.com/acme/widget"},
      {"github.com/acme/widget.gi%54", "github.com/acme/widget"},
  };
  for (const auto& [text, expected] : rows) {
    const auto p = parse_repo_pattern(text);
    ASSERT_TRUE(p) << text;
    EXPECT_EQ(p->to_string(), expected) << text;
    const auto again = parse_repo_pattern(p->to_string());
    ASSERT_TRUE(again) << text;
    EXPECT_EQ(again->to_string(), expected) << text;
  }
  // path_fuzz's input: its last segment decodes to "..giT", which is "." without the suffix.
  EXPECT_FALSE(parse_repo_pattern("50.e-es.e./..gi%2e-es.e./..gi%54"));
}

TEST(RuleMethod, MustBeAnUppercaseToken) {
  for (const char* good : {"GET", "PROPFIND", "M-SEARCH", "X_1"}) {
    EXPECT_TRUE(valid_rule_method(good)) << good;
  }
  std::string error;
  EXPECT_FALSE(valid_rule_method("get", &error));
  EXPECT_EQ(error, "methods are case-sensitive; write \"GET\"");
  for (const char* bad : {"", "GE T", "GET/", "G(T", "GET\n"}) {
    EXPECT_FALSE(valid_rule_method(bad)) << bad;
  }
}

}  // namespace
}  // namespace sandgate::policy
