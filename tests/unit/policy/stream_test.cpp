// decide_stream: one table of stream facts (entry mode, what the first bytes were, SNI, the
// sandbox's DNS answers for the dialled address, the address, the port) to one verdict, with
// no sockets. The transparent and CONNECT sessions only carry these verdicts out.
#include "policy/stream.hpp"

#include <gtest/gtest.h>

#include <vector>

#include "policy/request.hpp"

namespace sandgate::policy {
namespace {

RuleSource rule(const char* text, const char* origin = "sandboxes.web.allow") {
  return {*parse_host_pattern(text), origin};
}

std::shared_ptr<const Policy> make_policy() {
  SandboxSpec web;
  web.id = "web";
  web.allow = {rule("origin.test"), rule("origin.test:8080"), rule("other.test:8080")};
  web.deny = {rule("bad.origin.test", "sandboxes.web.deny")};
  web.ports = {80, 443, 8080};  // for the ranges; the names' rules give their own ports
  // Inspected: an inspect pattern, an http rule's host, a git rule's host.
  web.allow.insert(web.allow.end(), {rule("inspected.test"), rule("ruled.test"), rule("git.test"),
                                     rule("inspected.test:8080")});
  web.opaque = {rule("inspected.test:443", "sandboxes.web.opaque")};
  web.inspect = {rule("inspected.test", "sandboxes.web.inspect"),
                 rule("inspected.test:8080", "sandboxes.web.inspect"),
                 rule("denied.inspected.test", "sandboxes.web.inspect")};
  HttpRule http;
  http.hosts = {*parse_host_pattern("ruled.test")};
  http.allow = true;
  http.origin = "sandboxes.web.http_rules[0]";
  web.http_rules = {http};
  GitRule git;
  git.repos = {*parse_repo_pattern("git.test/acme/*")};
  git.fetch = true;
  git.origin = "sandboxes.web.git[0]";
  web.git_rules = {git};
  web.inspect_addresses = {{{*parse_ip_literal("198.18.0.7"), 443}, "sandboxes.web.inspect"}};
  web.allow_cidrs = {{*parse_cidr("198.18.0.0/15"), "sandboxes.web.allow_cidrs"},
                     {*parse_cidr("127.0.0.0/8"), "sandboxes.web.allow_cidrs"}};
  std::vector<Endpoint> self = {{*parse_ip_literal("127.0.0.1"), 15001}};
  return std::make_shared<const Policy>(std::vector<SandboxSpec>{web}, self);
}

struct Row {
  const char* name;
  EntryMode mode;
  bool known_sandbox;
  Opening opening;
  const char* sni;  // null: none
  std::vector<std::string> dns_names;
  const char* original;  // the address dialled (transparent) or the CONNECT authority's host
  std::uint16_t port;
  StreamAction action;
  Reason reason;
  EntryMode logged_as;
  const char* shown;  // "" for serve_http
  bool gated;
};

void PrintTo(const Row& row, std::ostream* os) {
  *os << row.name;
}

class DecideStream : public testing::TestWithParam<Row> {};

TEST_P(DecideStream, OneVerdictPerStream) {
  static const auto policy = make_policy();
  const Row& row = GetParam();
  const std::string sandbox = "web";
  const std::string sni = row.sni ? row.sni : "";
  const Host authority = normalize_host(row.original);
  StreamFacts f;
  f.mode = row.mode;
  f.sandbox = row.known_sandbox ? &sandbox : nullptr;
  f.opening = row.opening;
  f.sni = row.sni ? &sni : nullptr;
  f.dns_names = row.dns_names;
  f.port = row.port;
  if (row.mode == EntryMode::connect) {
    f.authority = &authority;
  } else {
    f.original = *parse_ip_literal(row.original);
  }
  const StreamVerdict v = decide_stream(*policy, f);
  EXPECT_EQ(v.action, row.action);
  EXPECT_EQ(v.decision.allowed, row.action != StreamAction::refuse);
  if (row.action != StreamAction::serve_http) {
    EXPECT_EQ(reason_name(v.decision.reason), reason_name(row.reason));
    EXPECT_EQ(v.shown, row.shown);
  }
  EXPECT_EQ(mode_name(v.mode), mode_name(row.logged_as));
  if (row.action == StreamAction::tunnel || row.action == StreamAction::intercept) {
    EXPECT_EQ(v.dial.display(), row.shown);
    EXPECT_EQ(v.gated, row.gated);
  }
}

using enum Opening;
using A = StreamAction;
using R = Reason;
using M = EntryMode;

INSTANTIATE_TEST_SUITE_P(Transparent, DecideStream,
                         testing::Values(Row{"unknown_source",
                                             M::tcp,
                                             false,
                                             tls,
                                             "origin.test",
                                             {},
                                             "198.18.0.9",
                                             443,
                                             A::refuse,
                                             R::unknown_sandbox,
                                             M::tcp,
                                             "198.18.0.9",
                                             false},
                                         Row{"http_is_served_request_by_request",
                                             M::tcp,
                                             true,
                                             http,
                                             nullptr,
                                             {},
                                             "198.18.0.9",
                                             80,
                                             A::serve_http,
                                             R::allowed_by_rule,
                                             M::http,
                                             "",
                                             false},
                                         Row{"proxy_request_is_served_and_refused_there",
                                             M::tcp,
                                             true,
                                             proxy_request,
                                             nullptr,
                                             {},
                                             "198.18.0.9",
                                             80,
                                             A::serve_http,
                                             R::allowed_by_rule,
                                             M::http,
                                             "",
                                             false},
                                         Row{"malformed_tls",
                                             M::tcp,
                                             true,
                                             tls_malformed,
                                             nullptr,
                                             {"origin.test"},
                                             "198.18.0.9",
                                             443,
                                             A::refuse,
                                             R::tls_malformed,
                                             M::tls,
                                             "198.18.0.9",
                                             false},
                                         Row{"undecidable",
                                             M::tcp,
                                             true,
                                             undecidable,
                                             nullptr,
                                             {"origin.test"},
                                             "198.18.0.9",
                                             443,
                                             A::refuse,
                                             R::unrecognized_protocol,
                                             M::tcp,
                                             "198.18.0.9",
                                             false},
                                         Row{"sni_allowed",
                                             M::tcp,
                                             true,
                                             tls,
                                             "origin.test",
                                             {},
                                             "203.0.113.5",
                                             443,
                                             A::tunnel,
                                             R::allowed_by_rule,
                                             M::tls,
                                             "origin.test",
                                             false},
                                         Row{"sni_wins_over_dns_names",
                                             M::tcp,
                                             true,
                                             tls,
                                             "nope.example",
                                             {"origin.test"},
                                             "203.0.113.5",
                                             443,
                                             A::refuse,
                                             R::no_matching_rule,
                                             M::tls,
                                             "nope.example",
                                             false},
                                         Row{"sni_denied_by_rule",
                                             M::tcp,
                                             true,
                                             tls,
                                             "bad.origin.test",
                                             {},
                                             "203.0.113.5",
                                             443,
                                             A::refuse,
                                             R::denied_by_rule,
                                             M::tls,
                                             "bad.origin.test",
                                             false},
                                         Row{"sni_invalid_is_shown_as_sent",
                                             M::tcp,
                                             true,
                                             tls,
                                             "bad name",
                                             {},
                                             "203.0.113.5",
                                             443,
                                             A::refuse,
                                             R::invalid_host,
                                             M::tls,
                                             "bad name",
                                             false},
                                         Row{"tls_without_sni_uses_dns_names",
                                             M::tcp,
                                             true,
                                             tls,
                                             nullptr,
                                             {"origin.test"},
                                             "203.0.113.5",
                                             443,
                                             A::tunnel,
                                             R::allowed_by_rule,
                                             M::tls,
                                             "origin.test",
                                             false},
                                         Row{"first_allowed_dns_name_wins",
                                             M::tcp,
                                             true,
                                             other,
                                             nullptr,
                                             {"nope.example", "other.test", "origin.test"},
                                             "203.0.113.5",
                                             8080,
                                             A::tunnel,
                                             R::allowed_by_rule,
                                             M::tcp,
                                             "other.test",
                                             false},
                                         Row{"silent_opening_is_gated",
                                             M::tcp,
                                             true,
                                             silent,
                                             nullptr,
                                             {"origin.test"},
                                             "203.0.113.5",
                                             8080,
                                             A::tunnel,
                                             R::allowed_by_rule,
                                             M::tcp,
                                             "origin.test",
                                             true},
                                         Row{"denied_dns_name_is_reported",
                                             M::tcp,
                                             true,
                                             other,
                                             nullptr,
                                             {"nope.example"},
                                             "203.0.113.5",
                                             8080,
                                             A::refuse,
                                             R::no_matching_rule,
                                             M::tcp,
                                             "nope.example",
                                             false},
                                         Row{"an_allowed_address_beats_denied_names",
                                             M::tcp,
                                             true,
                                             other,
                                             nullptr,
                                             {"nope.example"},
                                             "198.18.0.9",
                                             8080,
                                             A::tunnel,
                                             R::allowed_by_cidr,
                                             M::tcp,
                                             "198.18.0.9",
                                             false},
                                         Row{"no_name_no_range_is_unnamed",
                                             M::tcp,
                                             true,
                                             other,
                                             nullptr,
                                             {},
                                             "203.0.113.5",
                                             8080,
                                             A::refuse,
                                             R::unnamed_destination,
                                             M::tcp,
                                             "203.0.113.5",
                                             false},
                                         Row{"metadata_keeps_its_reason",
                                             M::tcp,
                                             true,
                                             other,
                                             nullptr,
                                             {},
                                             "169.254.169.254",
                                             8080,
                                             A::refuse,
                                             R::always_denied_address,
                                             M::tcp,
                                             "169.254.169.254",
                                             false},
                                         Row{"own_listener_keeps_its_reason",
                                             M::tcp,
                                             true,
                                             other,
                                             nullptr,
                                             {},
                                             "127.0.0.1",
                                             15001,
                                             A::refuse,
                                             R::proxy_loop,
                                             M::tcp,
                                             "127.0.0.1",
                                             false},
                                         Row{"nameless_bytes_on_443_are_unrecognized",
                                             M::tcp,
                                             true,
                                             other,
                                             nullptr,
                                             {"origin.test"},
                                             "203.0.113.5",
                                             443,
                                             A::refuse,
                                             R::unrecognized_protocol,
                                             M::tcp,
                                             "origin.test",
                                             false}));

INSTANTIATE_TEST_SUITE_P(Intercepted, DecideStream,
                         testing::Values(Row{"connect_to_inspected_host",
                                             M::connect,
                                             true,
                                             silent,
                                             nullptr,
                                             {},
                                             "inspected.test",
                                             443,
                                             A::intercept,
                                             R::allowed_by_rule,
                                             M::connect,
                                             "inspected.test",
                                             false},
                                         Row{"connect_to_http_rule_host",
                                             M::connect,
                                             true,
                                             silent,
                                             nullptr,
                                             {},
                                             "ruled.test",
                                             443,
                                             A::intercept,
                                             R::allowed_by_rule,
                                             M::connect,
                                             "ruled.test",
                                             false},
                                         Row{"connect_to_git_rule_host",
                                             M::connect,
                                             true,
                                             silent,
                                             nullptr,
                                             {},
                                             "git.test",
                                             443,
                                             A::intercept,
                                             R::allowed_by_rule,
                                             M::connect,
                                             "git.test",
                                             false},
                                         Row{"connect_inspected_but_not_allowed",
                                             M::connect,
                                             true,
                                             silent,
                                             nullptr,
                                             {},
                                             "denied.inspected.test",
                                             443,
                                             A::refuse,
                                             R::no_matching_rule,
                                             M::connect,
                                             "denied.inspected.test",
                                             false},
                                         Row{"connect_to_uninspected_host_tunnels",
                                             M::connect,
                                             true,
                                             silent,
                                             nullptr,
                                             {},
                                             "other.test",
                                             8080,
                                             A::tunnel,
                                             R::allowed_by_rule,
                                             M::connect,
                                             "other.test",
                                             true},
                                         Row{"sni_of_inspected_host",
                                             M::tcp,
                                             true,
                                             tls,
                                             "Inspected.Test",
                                             {},
                                             "198.18.0.9",
                                             443,
                                             A::intercept,
                                             R::allowed_by_rule,
                                             M::tls,
                                             "inspected.test",
                                             false},
                                         Row{"sni_of_git_rule_host",
                                             M::tcp,
                                             true,
                                             tls,
                                             "git.test",
                                             {"origin.test"},
                                             "198.18.0.9",
                                             443,
                                             A::intercept,
                                             R::allowed_by_rule,
                                             M::tls,
                                             "git.test",
                                             false},
                                         Row{"sni_of_uninspected_host_tunnels",
                                             M::tcp,
                                             true,
                                             tls,
                                             "origin.test",
                                             {"inspected.test"},
                                             "198.18.0.9",
                                             443,
                                             A::tunnel,
                                             R::allowed_by_rule,
                                             M::tls,
                                             "origin.test",
                                             false},
                                         Row{"tls_without_sni_to_an_inspected_dns_name",
                                             M::tcp,
                                             true,
                                             tls,
                                             nullptr,
                                             {"inspected.test"},
                                             "203.0.113.5",
                                             443,
                                             A::intercept,
                                             R::allowed_by_rule,
                                             M::tls,
                                             "inspected.test",
                                             false},
                                         Row{"silent_client_to_an_inspected_dns_name",
                                             M::tcp,
                                             true,
                                             silent,
                                             nullptr,
                                             {"inspected.test"},
                                             "203.0.113.5",
                                             8080,
                                             A::intercept,
                                             R::allowed_by_rule,
                                             M::tcp,
                                             "inspected.test",
                                             false},
                                         Row{"other_bytes_to_an_inspected_dns_name",
                                             M::tcp,
                                             true,
                                             other,
                                             nullptr,
                                             {"inspected.test"},
                                             "203.0.113.5",
                                             8080,
                                             A::refuse,
                                             R::unrecognized_protocol,
                                             M::tcp,
                                             "inspected.test",
                                             false},
                                         Row{"opaque_entry_still_splices_other_bytes",
                                             M::tcp,
                                             true,
                                             other,
                                             nullptr,
                                             {"inspected.test"},
                                             "203.0.113.5",
                                             443,
                                             A::tunnel,
                                             R::allowed_by_rule,
                                             M::tcp,
                                             "inspected.test",
                                             false},
                                         Row{"plain_http_is_served_and_decided_per_request",
                                             M::tcp,
                                             true,
                                             http,
                                             nullptr,
                                             {"inspected.test"},
                                             "203.0.113.5",
                                             80,
                                             A::serve_http,
                                             R::allowed_by_rule,
                                             M::http,
                                             "",
                                             false},
                                         // An inspect entry names an address with its port:
                                         // intercepted there, spliced on another port.
                                         Row{"connect_to_inspected_address",
                                             M::connect,
                                             true,
                                             silent,
                                             nullptr,
                                             {},
                                             "198.18.0.7",
                                             443,
                                             A::intercept,
                                             R::allowed_by_cidr,
                                             M::connect,
                                             "198.18.0.7",
                                             false},
                                         Row{"connect_to_inspected_address_other_port",
                                             M::connect,
                                             true,
                                             silent,
                                             nullptr,
                                             {},
                                             "198.18.0.7",
                                             80,
                                             A::tunnel,
                                             R::allowed_by_cidr,
                                             M::connect,
                                             "198.18.0.7",
                                             true}));

INSTANTIATE_TEST_SUITE_P(Connect, DecideStream,
                         testing::Values(Row{"allowed_is_gated",
                                             M::connect,
                                             true,
                                             silent,
                                             nullptr,
                                             {},
                                             "origin.test",
                                             443,
                                             A::tunnel,
                                             R::allowed_by_rule,
                                             M::connect,
                                             "origin.test",
                                             true},
                                         Row{"denied",
                                             M::connect,
                                             true,
                                             silent,
                                             nullptr,
                                             {},
                                             "bad.origin.test",
                                             443,
                                             A::refuse,
                                             R::denied_by_rule,
                                             M::connect,
                                             "bad.origin.test",
                                             false},
                                         Row{"loop",
                                             M::connect,
                                             true,
                                             silent,
                                             nullptr,
                                             {},
                                             "127.0.0.1",
                                             15001,
                                             A::refuse,
                                             R::proxy_loop,
                                             M::connect,
                                             "127.0.0.1",
                                             false}));

}  // namespace
}  // namespace sandgate::policy

namespace sandgate::policy {
namespace {

// decide_request: each request on its own host and port; a CONNECT where origin requests
// belong is a nested proxy request whatever its target.
TEST(DecideRequest, EachRequestOnItsOwnHostAndPort) {
  const auto policy = make_policy();
  const Host origin = normalize_host("origin.test");
  const Host bad = normalize_host("bad.origin.test");
  const Host nope = normalize_host("nope.example");
  struct Case {
    const Host* host;
    std::uint16_t port;
    bool connect;
    bool allowed;
    Reason reason;
  };
  const Case cases[] = {
      {&origin, 80, false, true, Reason::allowed_by_rule},
      {&origin, 8080, false, true, Reason::allowed_by_rule},
      {&origin, 9999, false, false, Reason::port_not_allowed},
      {&bad, 80, false, false, Reason::denied_by_rule},
      {&nope, 80, false, false, Reason::no_matching_rule},
      {&origin, 80, true, false, Reason::nested_proxy},
  };
  for (const Case& c : cases) {
    RequestFacts f;
    f.sandbox = "web";
    f.host = c.host;
    f.port = c.port;
    f.method = c.connect ? "CONNECT" : "GET";
    f.path = "/";
    f.connect_to_origin = c.connect;
    const Decision d = decide_request(*policy, f);
    EXPECT_EQ(d.allowed, c.allowed) << c.host->display() << ":" << c.port;
    EXPECT_EQ(reason_name(d.reason), reason_name(c.reason)) << c.host->display() << ":" << c.port;
  }
}

// A stream to the DNS sink is never tunnelled, whatever it names and whatever the address's
// own rules say (here the sink lies in an allow_cidrs range): HTTP is served so that each
// request is refused, TLS naming a host is intercepted for the same, the rest is refused on
// the newest name the sandbox's DNS refused (else the address). A name the policy allows now
// is refused as a stale answer. Control: the same address, not the sink, is tunnelled.
TEST(DecideStreamSink, NothingIsDialledAndEachProtocolIsAnsweredInItsOwnTerms) {
  const auto policy = make_policy();
  const std::string sandbox = "web";
  struct Case {
    const char* name;
    Opening opening;
    const char* sni;
    std::vector<std::string> dns_names;
    StreamAction action;
    Reason reason;
    const char* shown;
  };
  const Case cases[] = {
      {"http", http, nullptr, {"evil.test"}, StreamAction::serve_http, Reason::allowed_by_rule, ""},
      {"tls_refused_name",
       tls,
       "evil.test",
       {"evil.test"},
       StreamAction::intercept,
       Reason::no_matching_rule,
       "evil.test"},
      {"tls_denied_name",
       tls,
       "bad.origin.test",
       {},
       StreamAction::intercept,
       Reason::denied_by_rule,
       "bad.origin.test"},
      {"tls_allowed_now",
       tls,
       "origin.test",
       {},
       StreamAction::intercept,
       Reason::stale_dns_answer,
       "origin.test"},
      {"tls_no_sni",
       tls,
       nullptr,
       {"evil.test"},
       StreamAction::refuse,
       Reason::no_matching_rule,
       "evil.test"},
      {"ssh_after_dns",
       other,
       nullptr,
       {"evil.test", "older.test"},
       StreamAction::refuse,
       Reason::no_matching_rule,
       "evil.test"},
      {"silent_no_name",
       silent,
       nullptr,
       {},
       StreamAction::refuse,
       Reason::stale_dns_answer,
       "198.18.0.9"},
  };
  for (const Case& c : cases) {
    const std::string sni = c.sni ? c.sni : "";
    StreamFacts f;
    f.sandbox = &sandbox;
    f.opening = c.opening;
    f.sni = c.sni ? &sni : nullptr;
    f.dns_names = c.dns_names;
    f.original = *parse_ip_literal("198.18.0.9");
    f.port = c.opening == silent ? 8080 : 443;  // allow_cidrs opens the address on 8080
    f.sink = true;
    const StreamVerdict v = decide_stream(*policy, f);
    EXPECT_TRUE(v.sunk) << c.name;
    EXPECT_EQ(v.action, c.action) << c.name;
    if (c.action == StreamAction::serve_http) continue;
    EXPECT_FALSE(v.decision.allowed) << c.name;
    EXPECT_EQ(reason_name(v.decision.reason), reason_name(c.reason)) << c.name;
    EXPECT_EQ(v.shown, c.shown) << c.name;
  }
  StreamFacts control;
  control.sandbox = &sandbox;
  control.opening = silent;
  control.original = *parse_ip_literal("198.18.0.9");
  control.port = 8080;
  const StreamVerdict v = decide_stream(*policy, control);
  EXPECT_EQ(v.action, StreamAction::tunnel);
  EXPECT_FALSE(v.sunk);
}

// On a sunk stream every request is refused: on its host's decision, or as a stale answer
// when that allows it now; a git request says what git asked, so git prints the refusal.
// Control: the same requests on a stream that is not sunk.
TEST(DecideRequest, ASunkRequestIsRefusedWhateverItAsks) {
  const auto policy = make_policy();
  const Host origin = normalize_host("origin.test");
  const Host nope = normalize_host("nope.example");
  RequestFacts f;
  f.sandbox = "web";
  f.port = 80;
  f.method = "GET";
  f.path = "/acme/widget.git/info/refs?service=git-upload-pack";
  f.host = &origin;
  EXPECT_TRUE(decide_request(*policy, f).allowed);
  f.sunk = true;
  Decision d = decide_request(*policy, f);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(reason_name(d.reason), "stale_dns_answer");
  EXPECT_TRUE(d.git.advertisement);
  EXPECT_EQ(d.git.service(), "git-upload-pack");
  f.host = &nope;
  f.path = "/";
  d = decide_request(*policy, f);
  EXPECT_EQ(reason_name(d.reason), "no_matching_rule");
  EXPECT_FALSE(d.git.advertisement);
}

}  // namespace
}  // namespace sandgate::policy
