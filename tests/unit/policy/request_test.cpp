// decide_request with method, path and git rules, and Policy::inspects: one table of
// requests to one decision each, no sockets. Encoded-path tricks (THREATS 12) have rows here
// and in path_test.cpp.
#include "policy/request.hpp"

#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "policy/suggestion.hpp"

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
                   std::vector<PathGlob> paths, bool allow, RuleMode mode, std::size_t index,
                   std::optional<PathCase> path_case = std::nullopt) {
  HttpRule r;
  r.hosts = std::move(hosts);
  r.methods = std::move(methods);
  r.paths = std::move(paths);
  r.path_case = path_case;
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
                        "gitaudit.test", "deny.test", "folded.test"}) {
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
      // THREATS 32: a deny list before a broad allow, on a host whose paths keep their case...
      http_rule({host("deny.test")}, {"DELETE"}, {glob("/repos/acme/prod/**")}, false, M::enforce,
                6),
      http_rule({host("deny.test")}, {"GET"}, {glob("/secret/**")}, false, M::enforce, 7),
      http_rule({host("deny.test")}, {}, {}, true, M::enforce, 8),
      // ... on one a rule says ignores it, and on api.github.com a rule that keeps it.
      http_rule({host("folded.test")}, {"DELETE"}, {glob("/repos/acme/prod/**")}, false, M::enforce,
                9, PathCase::insensitive),
      http_rule({host("folded.test")}, {"GET", "POST", "DELETE"}, {}, true, M::enforce, 10),
      http_rule({host("api.github.com")}, {"GET"}, {glob("/Exact/Case")}, true, M::enforce, 11,
                PathCase::sensitive),
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
  std::vector<std::string_view> overrides = {};  // method-override field values
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
  f.method_overrides = row.overrides;
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
        Row{"lowercase_method_matches_an_uppercase_rule", "api.github.com", 443, "get",
            "/repos/acme/x", true, R::allowed_by_rule, "sandboxes.web.http_rules[0]"},
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

constexpr const char* kDenyDelete = "sandboxes.web.http_rules[6]";
constexpr const char* kDenyGet = "sandboxes.web.http_rules[7]";
constexpr const char* kAllowRest = "sandboxes.web.http_rules[8]";
constexpr const char* kFoldedDeny = "sandboxes.web.http_rules[9]";
constexpr const char* kFoldedAllow = "sandboxes.web.http_rules[10]";
constexpr const char* kDelete = "DELETE";

// THREATS 32: a deny rule is as strong as what the origin will do with the request. Each
// refusal has its allowed control next to it.
INSTANTIATE_TEST_SUITE_P(
    DenyAsTheOriginServes, DecideRequestRules,
    testing::Values(
        Row{"deny_rule", "deny.test", 443, kDelete, "/repos/acme/prod/db", false,
            R::denied_by_http_rule, kDenyDelete},
        Row{"deny_rule_control_other_repo", "deny.test", 443, kDelete, "/repos/acme/dev/db", true,
            R::allowed_by_rule, kAllowRest},
        // Methods without case (Werkzeug and Django upper-case them).
        Row{"lowercase_method_is_denied", "deny.test", 443, "delete", "/repos/acme/prod/db", false,
            R::denied_by_http_rule, kDenyDelete},
        Row{"mixed_case_method_is_denied", "deny.test", 443, "DeLeTe", "/repos/acme/prod/db", false,
            R::denied_by_http_rule, kDenyDelete},
        Row{"lowercase_method_control", "deny.test", 443, "delete", "/repos/acme/dev/db", true,
            R::allowed_by_rule, kAllowRest},
        // HEAD under GET (Flask, Express, Go serve HEAD with the GET handler).
        Row{"head_is_denied_by_a_get_rule", "deny.test", 443, "HEAD", "/secret/key", false,
            R::denied_by_http_rule, kDenyGet},
        Row{"lowercase_head_too", "deny.test", 443, "head", "/secret/key", false,
            R::denied_by_http_rule, kDenyGet},
        Row{"head_control_elsewhere", "deny.test", 443, "HEAD", "/public/key", true,
            R::allowed_by_rule, kAllowRest},
        Row{"head_is_allowed_by_a_get_rule", "folded.test", 443, "HEAD", "/x", true,
            R::allowed_by_rule, kFoldedAllow},
        Row{"get_rule_does_not_cover_put", "folded.test", 443, "PUT", "/x", false,
            R::no_matching_http_rule, ""},
        // Override fields: decided as the method sent and as the override; both must pass.
        Row{"override_field_is_denied",
            "deny.test",
            443,
            kPost,
            "/repos/acme/prod/db",
            false,
            R::denied_by_http_rule,
            kDenyDelete,
            false,
            G::none,
            "",
            {"DELETE"}},
        Row{"override_field_in_lowercase",
            "deny.test",
            443,
            kPost,
            "/repos/acme/prod/db",
            false,
            R::denied_by_http_rule,
            kDenyDelete,
            false,
            G::none,
            "",
            {" delete "}},
        Row{"override_in_a_list",
            "deny.test",
            443,
            kPost,
            "/repos/acme/prod/db",
            false,
            R::denied_by_http_rule,
            kDenyDelete,
            false,
            G::none,
            "",
            {"PATCH, DELETE"}},
        Row{"second_override_field",
            "deny.test",
            443,
            kPost,
            "/repos/acme/prod/db",
            false,
            R::denied_by_http_rule,
            kDenyDelete,
            false,
            G::none,
            "",
            {"PATCH", "DELETE"}},
        Row{"override_to_head_meets_the_get_rule",
            "deny.test",
            443,
            kPost,
            "/secret/key",
            false,
            R::denied_by_http_rule,
            kDenyGet,
            false,
            G::none,
            "",
            {"HEAD"}},
        Row{"override_control_allowed_method",
            "deny.test",
            443,
            kPost,
            "/repos/acme/prod/db",
            true,
            R::allowed_by_rule,
            kAllowRest,
            false,
            G::none,
            "",
            {"PATCH"}},
        Row{"override_control_other_path",
            "deny.test",
            443,
            kPost,
            "/repos/acme/dev/db",
            true,
            R::allowed_by_rule,
            kAllowRest,
            false,
            G::none,
            "",
            {"DELETE"}},
        Row{"query_method_parameter", "deny.test", 443, kPost, "/repos/acme/prod/db?_method=delete",
            false, R::denied_by_http_rule, kDenyDelete},
        Row{"query_method_parameter_encoded", "deny.test", 443, kPost,
            "/repos/acme/prod/db?x=1&%5Fmethod=DEL%45TE", false, R::denied_by_http_rule,
            kDenyDelete},
        Row{"query_method_parameter_php_dot", "deny.test", 443, kPost,
            "/repos/acme/prod/db?.method=DELETE", false, R::denied_by_http_rule, kDenyDelete},
        Row{"query_other_parameter_control", "deny.test", 443, kPost,
            "/repos/acme/prod/db?method=DELETE", true, R::allowed_by_rule, kAllowRest},
        // An allow list: the override must be allowed too; the sent method's rule is named.
        Row{"override_outside_an_allow_list",
            "api.github.com",
            443,
            kPost,
            "/repos/acme/widget/issues",
            false,
            R::no_matching_http_rule,
            "",
            false,
            G::none,
            "",
            {"DELETE"}},
        Row{"override_inside_an_allow_list",
            "api.github.com",
            443,
            kPost,
            "/repos/acme/widget/issues",
            true,
            R::allowed_by_rule,
            "sandboxes.web.http_rules[1]",
            false,
            G::none,
            "",
            {"GET"}},
        Row{"override_refused_by_an_audit_rule",
            "audit.test",
            443,
            kPost,
            "/ok/1",
            true,
            R::denied_by_http_rule,
            "sandboxes.web.http_rules[3]",
            true,
            G::none,
            "",
            {"DELETE"}},
        // Paths without case where the host resolves them so (github.com and its subdomains),
        // or where a rule says so.
        Row{"github_api_path_case_ignored_by_deny", "api.github.com", 443, kGet, "/ADMIN/users",
            false, R::denied_by_http_rule, "sandboxes.web.http_rules[2]"},
        Row{"github_api_path_case_ignored_by_allow", "api.github.com", 443, kGet,
            "/repos/ACME/Widget", true, R::allowed_by_rule, "sandboxes.web.http_rules[0]"},
        Row{"rule_keeps_case_on_github", "api.github.com", 443, kGet, "/exact/case", false,
            R::no_matching_http_rule, ""},
        Row{"rule_keeps_case_on_github_control", "api.github.com", 443, kGet, "/Exact/Case", true,
            R::allowed_by_rule, "sandboxes.web.http_rules[11]"},
        Row{"rule_ignores_case", "folded.test", 443, kDelete, "/Repos/ACME/prod/db", false,
            R::denied_by_http_rule, kFoldedDeny},
        Row{"rule_ignores_case_control", "folded.test", 443, kDelete, "/repos/acme/dev/db", true,
            R::allowed_by_rule, kFoldedAllow},
        Row{"other_hosts_keep_case", "deny.test", 443, kDelete, "/repos/ACME/prod/db", true,
            R::allowed_by_rule, kAllowRest}));

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
        Row{"path_named_objects_is_not_git", "github.com", 443, kGet,
            "/acme/widget/tree/main/objects", true, R::allowed_by_rule,
            "sandboxes.web.allow:github.com"},
        Row{"head_method_advertisement", "github.com", 443, "HEAD",
            "/acme/widget/info/refs?service=git-receive-pack", false, R::git_not_allowed, kAcme0,
            false, G::push, "acme/widget"},
        Row{"audit_push_refusal", "gitaudit.test", 443, kPost, "/x/y/git-receive-pack", true,
            R::git_not_allowed, "sandboxes.web.git[2]:gitaudit.test/x/*", true, G::push, "x/y"},
        Row{"audit_rule_fetch_allowed", "gitaudit.test", 443, kPost, "/x/y/git-upload-pack", true,
            R::allowed_by_rule, "sandboxes.web.git[2]:gitaudit.test/x/*", false, G::fetch, "x/y"},
        Row{"no_match_with_an_enforce_rule", "gitaudit.test", 443, kPost,
            "/other/y/git-upload-pack", false, R::git_not_allowed, "", false, G::fetch, "other/y"},
        Row{"second_pattern_of_a_rule", "gitaudit.test", 443, kPost, "/nothing/git-receive-pack",
            true, R::allowed_by_rule, "sandboxes.web.git[1]:gitaudit.test/nothing", false, G::push,
            "nothing"}));

// THREATS 33: git's dumb HTTP protocol reads a repository's files; every path into them is
// that repository's fetch (a write, which dumb push does over WebDAV, its push). A refused
// repository is refused, an allowed one allowed.
INSTANTIATE_TEST_SUITE_P(
    DumbGit, DecideRequestRules,
    testing::Values(
        Row{"refs_without_service_refused", "github.com", 443, kGet, "/other/x.git/info/refs",
            false, R::git_not_allowed, "", false, G::fetch, "other/x"},
        Row{"refs_without_service_allowed", "github.com", 443, kGet, "/acme/widget/info/refs", true,
            R::allowed_by_rule, kAcme0, false, G::fetch, "acme/widget"},
        Row{"refs_with_unknown_service", "github.com", 443, kGet,
            "/other/x/info/refs?service=git-upload-archive", false, R::git_not_allowed, "", false,
            G::fetch, "other/x"},
        Row{"head_file_refused", "github.com", 443, kGet, "/other/x.git/HEAD", false,
            R::git_not_allowed, "", false, G::fetch, "other/x"},
        Row{"head_file_allowed", "github.com", 443, kGet, "/acme/widget.git/HEAD", true,
            R::allowed_by_rule, kAcme0, false, G::fetch, "acme/widget"},
        Row{"loose_object_refused", "github.com", 443, kGet,
            "/other/x.git/objects/4b/825dc642cb6eb9a060e54bf8d69288fbee4904", false,
            R::git_not_allowed, "", false, G::fetch, "other/x"},
        Row{"loose_object_allowed", "github.com", 443, kGet,
            "/acme/widget.git/objects/4b/825dc642cb6eb9a060e54bf8d69288fbee4904", true,
            R::allowed_by_rule, kAcme0, false, G::fetch, "acme/widget"},
        Row{"info_packs_refused", "github.com", 443, kGet, "/other/x/objects/info/packs", false,
            R::git_not_allowed, "", false, G::fetch, "other/x"},
        Row{"pack_refused", "github.com", 443, kGet, "/other/x.git/objects/pack/pack-1a2b.pack",
            false, R::git_not_allowed, "", false, G::fetch, "other/x"},
        Row{"pack_index_by_head_refused", "github.com", 443, "HEAD",
            "/other/x.git/objects/pack/pack-1a2b.idx", false, R::git_not_allowed, "", false,
            G::fetch, "other/x"},
        Row{"pack_allowed", "github.com", 443, kGet, "/acme/widget/objects/pack/pack-1a2b.pack",
            true, R::allowed_by_rule, kAcme0, false, G::fetch, "acme/widget"},
        Row{"packed_refs_refused", "github.com", 443, kGet, "/other/x/packed-refs", false,
            R::git_not_allowed, "", false, G::fetch, "other/x"},
        Row{"ref_file_refused", "github.com", 443, kGet, "/other/x/refs/heads/main", false,
            R::git_not_allowed, "", false, G::fetch, "other/x"},
        Row{"upper_case_path", "github.com", 443, kGet, "/Other/X.GIT/OBJECTS/INFO/PACKS", false,
            R::git_not_allowed, "", false, G::fetch, "other/x"},
        Row{"dot_segments_into_another_repo", "github.com", 443, kGet,
            "/acme/widget/../../other/x/HEAD", false, R::git_not_allowed, "", false, G::fetch,
            "other/x"},
        Row{"repository_named_objects", "github.com", 443, kGet, "/acme/objects/objects/info/packs",
            true, R::allowed_by_rule, kAcme0, false, G::fetch, "acme/objects"},
        Row{"webdav_put_is_a_push", "github.com", 443, "PUT",
            "/acme/widget.git/objects/4b/825dc642cb6eb9a060e54bf8d69288fbee4904", false,
            R::git_not_allowed, kAcme0, false, G::push, "acme/widget"},
        Row{"webdav_ref_move_is_a_push", "github.com", 443, "MOVE",
            "/acme/widget.git/refs/heads/main", false, R::git_not_allowed, kAcme0, false, G::push,
            "acme/widget"},
        Row{"webdav_lock_is_a_push", "github.com", 443, "LOCK", "/acme/widget.git/info/refs", false,
            R::git_not_allowed, kAcme0, false, G::push, "acme/widget"},
        Row{"webdav_push_allowed", "github.com", 443, "PUT",
            "/acme-open/tool.git/objects/pack/pack-1a2b.pack", true, R::allowed_by_rule, kOpen1,
            false, G::push, "acme-open/tool"}));

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
  SandboxHome web;
  web.id = "web";
  // An array of tables: it works whether or not the table has [[...git]] entries already.
  EXPECT_EQ(suggest(web, github, 443, unmatched).text(),
            "[[sandboxes.web.git]]\nrepos = [\"github.com/other/tool\"]\nallow = [\"push\"]");
  EXPECT_EQ(suggest(web, github, 8443, unmatched).toml,
            "[[sandboxes.web.git]]\nrepos = [\"github.com:8443/other/tool\"]\nallow = [\"push\"]");
  // A repository a rule matched: a later rule would never be read, so no suggestion.
  f.path = "/acme/widget/info/refs?service=git-receive-pack";
  const Decision matched = decide_request(*policy, f);
  ASSERT_EQ(matched.reason, Reason::git_not_allowed);
  EXPECT_FALSE(suggest(web, github, 443, matched));
  EXPECT_NE(suggest(web, github, 443, matched).why_none, "");
}

TEST(SuggestRule, RequestNoRuleMatchedSuggestsAnHttpRule) {
  const auto policy = make_policy();
  const Host api = normalize_host("api.github.com");
  SandboxHome home;
  home.kind = SandboxHome::Kind::file;
  home.file = "/etc/sandgate/sandboxes.d/web.toml";
  const auto suggestion = [&](const char* method, const char* target, std::uint16_t port) {
    RequestFacts f;
    f.sandbox = "web";
    f.host = &api;
    f.port = port;
    f.method = method;
    f.path = target;
    return suggest(home, api, port, decide_request(*policy, f)).text();
  };
  const std::string file = "/etc/sandgate/sandboxes.d/web.toml: [[http_rules]]\n";
  EXPECT_EQ(suggestion("DELETE", "/repos/acme/%7ex/./y?q=1", 443),
            file +
                "hosts = [\"api.github.com\"]\nmethods = [\"DELETE\"]\npaths = "
                "[\"/repos/acme/~x/y\"]\naction = \"allow\"");
  EXPECT_EQ(suggestion("PUT", "/", 8443),
            file +
                "hosts = [\"api.github.com:8443\"]\nmethods = [\"PUT\"]\npaths = "
                "[\"/\"]\naction = \"allow\"");
  EXPECT_EQ(suggestion("get", "/x", 443),  // the method as config writes it
            file +
                "hosts = [\"api.github.com\"]\nmethods = [\"GET\"]\npaths = "
                "[\"/x\"]\naction = \"allow\"");
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
  EXPECT_EQ(error, "methods are written in uppercase (a rule matches any case); write \"GET\"");
  for (const char* bad : {"", "GE T", "GET/", "G(T", "GET\n"}) {
    EXPECT_FALSE(valid_rule_method(bad)) << bad;
  }
}

struct MethodsRow {
  const char* name;
  const char* method;
  std::vector<std::string_view> overrides;
  const char* query;
  std::vector<std::string> expected;
};

// THREATS 32: the methods the http rules decide a request on.
TEST(RequestMethods, TheSentMethodThenEveryOverride) {
  const MethodsRow rows[] = {
      {"sent_method_uppercased", "delete", {}, "", {"DELETE"}},
      {"no_override", "POST", {}, "a=1", {"POST"}},
      {"override_field", "POST", {"DELETE"}, "", {"POST", "DELETE"}},
      {"override_trimmed_and_uppercased", "POST", {" patch\t"}, "", {"POST", "PATCH"}},
      {"override_list", "POST", {"PUT, DELETE,,"}, "", {"POST", "PUT", "DELETE"}},
      {"several_fields", "POST", {"PUT", "DELETE"}, "", {"POST", "PUT", "DELETE"}},
      {"repeats_dropped", "post", {"POST", "delete", "DELETE"}, "", {"POST", "DELETE"}},
      {"empty_override_ignored", "POST", {"", " "}, "", {"POST"}},
      {"query_parameter", "POST", {}, "x=1&_method=delete", {"POST", "DELETE"}},
      {"query_parameter_encoded", "POST", {}, "%5Fmethod=PU%54", {"POST", "PUT"}},
      {"php_reads_dot_as_underscore", "POST", {}, ".method=PUT", {"POST", "PUT"}},
      {"php_reads_space_as_underscore",
       "POST",
       {},
       "+method=PUT&%20method=GET",
       {"POST", "PUT", "GET"}},
      {"php_reads_bracket_as_underscore", "POST", {}, "[method=PUT", {"POST", "PUT"}},
      {"other_parameters_ignored", "POST", {}, "method=PUT&_methods=GET&_METHOD=HEAD", {"POST"}},
      {"field_then_query", "POST", {"PUT"}, "_method=DELETE", {"POST", "PUT", "DELETE"}},
  };
  for (const MethodsRow& row : rows) {
    EXPECT_EQ(request_methods(row.method, row.overrides, row.query), row.expected) << row.name;
  }
}

struct GitRow {
  const char* name;
  const char* method;
  const char* path;  // canonical
  const char* query;
  GitOperation op;
  bool dumb;
  bool advertisement;
  const char* repo;
};

// What recognize_git takes for git, smart or dumb (THREATS 33), and what it leaves alone.
TEST(RecognizeGit, SmartAndDumbHttp) {
  const GitRow rows[] = {
      {"smart_fetch_advertisement", "GET", "/a/b/info/refs", "service=git-upload-pack", G::fetch,
       false, true, "a/b"},
      {"smart_push_advertisement_by_head", "HEAD", "/a/b/info/refs", "service=git-receive-pack",
       G::push, false, false, "a/b"},
      {"smart_fetch_rpc", "POST", "/a/b.git/git-upload-pack", "", G::fetch, false, false, "a/b"},
      {"dumb_refs", "GET", "/a/b.git/info/refs", "", G::fetch, true, false, "a/b"},
      {"dumb_refs_unknown_service", "GET", "/a/b/info/refs", "service=x", G::fetch, true, false,
       "a/b"},
      {"dumb_head_file", "GET", "/a/b.git/HEAD", "", G::fetch, true, false, "a/b"},
      {"dumb_head_file_by_head", "HEAD", "/a/b.git/HEAD", "", G::fetch, true, false, "a/b"},
      {"dumb_loose_object", "GET", "/a/b/objects/ab/cdef", "", G::fetch, true, false, "a/b"},
      {"dumb_info_packs", "GET", "/a/b/objects/info/packs", "", G::fetch, true, false, "a/b"},
      {"dumb_alternates", "GET", "/a/b/objects/info/http-alternates", "", G::fetch, true, false,
       "a/b"},
      {"dumb_pack", "GET", "/a/b/objects/pack/pack-00ff.pack", "", G::fetch, true, false, "a/b"},
      {"dumb_object_directory", "PROPFIND", "/a/b/objects/ab", "", G::push, true, false, "a/b"},
      {"dumb_packed_refs", "GET", "/a/b/packed-refs", "", G::fetch, true, false, "a/b"},
      {"dumb_ref", "GET", "/a/b/refs/tags/v1", "", G::fetch, true, false, "a/b"},
      {"dumb_push_put", "PUT", "/a/b/objects/ab/cdef", "", G::push, true, false, "a/b"},
      {"dumb_push_mkcol", "MKCOL", "/a/b/objects/ab/", "", G::push, true, false, "a/b"},
      {"dumb_push_ref", "PUT", "/a/b/refs/heads/main", "", G::push, true, false, "a/b"},
      {"first_objects_directory_decides", "GET", "/a/objects/pack/x/objects/pack/p.pack", "",
       G::fetch, true, false, "a"},
      {"repository_at_the_root", "GET", "/HEAD", "", G::fetch, true, false, ""},
      {"objects_without_a_kind", "GET", "/a/b/objects/readme", "", G::none, false, false, ""},
      {"objects_last", "GET", "/a/b/objects", "", G::none, false, false, ""},
      {"refs_without_a_kind", "GET", "/a/refs/pulls/1", "", G::none, false, false, ""},
      {"repository_page", "GET", "/a/b", "", G::none, false, false, ""},
      {"info_without_refs", "GET", "/a/b/info/exclude", "", G::none, false, false, ""},
      {"post_elsewhere", "POST", "/a/b/issues", "", G::none, false, false, ""},
      {"asterisk_form", "OPTIONS", "*", "", G::none, false, false, ""},
  };
  for (const GitRow& row : rows) {
    const GitRequest g = recognize_git(row.method, row.path, row.query);
    EXPECT_EQ(git_operation_name(g.op), git_operation_name(row.op)) << row.name;
    EXPECT_EQ(g.dumb, row.dumb) << row.name;
    EXPECT_EQ(g.advertisement, row.advertisement) << row.name;
    EXPECT_EQ(g.repo, row.repo) << row.name;
  }
}

TEST(HostIgnoresPathCase, GitHubAndItsSubdomains) {
  for (const char* name : {"github.com", "api.github.com", "uploads.github.com"}) {
    EXPECT_TRUE(host_ignores_path_case(name)) << name;
  }
  for (const char* name : {"notgithub.com", "github.com.evil.test", "gitlab.com", "api.test"}) {
    EXPECT_FALSE(host_ignores_path_case(name)) << name;
  }
}

}  // namespace
}  // namespace sandgate::policy
