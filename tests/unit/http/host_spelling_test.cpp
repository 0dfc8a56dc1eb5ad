// Property: `sandgate decide` and the daemon agree on every host spelling (issue 9 item 4).
//
// Each host spelling (brackets around names, IPv4 in odd forms, trailing dots, case,
// percent-encoding, userinfo, zones, IDN, whitespace, ...) is combined with each port spelling
// and fed to both sides, in every place a client can put an authority:
//   the daemon: parse_request_head on a CONNECT, an absolute-form GET and an origin-form GET
//               with Host, then normalize_host and Policy::decide, as the sessions do;
//   decide:     parse_target on the same text (as a URL for the absolute form), then
//               normalize_host and Policy::decide, as src/app/decide_command.cpp does.
// Both must refuse it, or both must reach the same host, port and decision.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "http/request_head.hpp"
#include "policy/host.hpp"
#include "policy/policy.hpp"

namespace sandgate {
namespace {

std::shared_ptr<const policy::Policy> make_policy() {
  policy::SandboxSpec sb;
  sb.id = "sb";
  for (const char* text : {"allowed.test", "*.wild.test", "xn--bcher-kva.test", "allowed_x.test"}) {
    sb.allow.push_back({*policy::parse_host_pattern(text), "sandboxes.sb.allow"});
  }
  for (const char* text : {"127.0.0.0/8", "::1/128"}) {
    sb.allow_cidrs.push_back({*policy::parse_cidr(text), "sandboxes.sb.allow_cidrs"});
  }
  return std::make_shared<const policy::Policy>(std::vector<policy::SandboxSpec>{sb},
                                                std::vector<policy::Endpoint>{});
}

// One side's answer, as text so that a difference prints readably.
std::string verdict(const policy::Policy& p, const policy::Host& host, std::uint16_t port) {
  const policy::Decision d = p.decide("sb", host, port, policy::EntryMode::http);
  return std::string(d.allowed ? "allow " : "deny ") + std::string(policy::reason_name(d.reason)) +
         " " + host.display() + ":" + std::to_string(port);
}
const std::string kRefused = "refused (400 / usage error)";

std::string daemon_verdict(const policy::Policy& p, const std::string& head) {
  const auto parsed = http::parse_request_head(head, http::HeadLimits{});
  if (!parsed) return kRefused;
  return verdict(p, policy::normalize_host(parsed->host), parsed->port);
}

std::string decide_verdict(const policy::Policy& p, const std::string& target) {
  const auto parsed = policy::parse_target(target);
  if (!parsed) return kRefused;
  return verdict(p, policy::normalize_host(parsed->host), parsed->port.value_or(443));
}

// A field value loses its leading and trailing whitespace (RFC 9110 §5.5) before anyone reads
// it, so the Host form is compared with the spelling as the field carries it.
std::string trim_ows(std::string s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.erase(0, 1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.pop_back();
  return s;
}

std::vector<std::string> host_spellings() {
  std::vector<std::string> hosts = {
      // names, case, trailing dots
      "allowed.test", "ALLOWED.TEST", "Allowed.Test.", "allowed.test..", ".allowed.test",
      "a.wild.test", "wild.test", "*.wild.test", "allowed_x.test", "-bad.test", "a..test",
      "denied.test", "localhost",
      // brackets around what is not an IPv6 literal
      "[allowed.test]", "[ALLOWED.test]", "[127.0.0.1]", "[2130706433]", "[1:2]", "[v1.fe80::1]",
      "[]", "[", "[::1", "::1]", "[[::1]]",
      // IPv6 literals, zones, bare IPv6
      "[::1]", "[0:0::1]", "[::ffff:127.0.0.1]", "[::FFFF:7F00:1]", "[fe80::1%eth0]",
      "[fe80::1%25eth0]", "::1", "::ffff:127.0.0.1",
      // IPv4 in odd forms
      "127.0.0.1", "127.1", "0x7f.1", "0X7F.0.0.1", "0177.0.0.1", "2130706433", "0x7f000001",
      "127.0.0.1.", "127.0.0.01", "1.2.3.999", "1.2.3.4.5", "allowed.0x1f", "8.8.8.8",
      // percent-encoding, userinfo, IDN, whitespace, other bytes
      "allowed%2etest", "%61llowed.test", "allowed.test%00", "user@allowed.test",
      "allowed.test@evil.test", ":@allowed.test", "xn--bcher-kva.test",
      "b\xc3\xbc"
      "cher.test",
      " allowed.test", "allowed.test ", "allowed .test", "allowed.test\t", "\tallowed.test",
      "allowed.test/", "allowed.test?", "allowed\\.test", "allowed.test\"", "allowed,test", "",
      // lengths: a label of 64, a name of 254, a long padded name
      std::string(64, 'a') + ".test", std::string(63, 'a') + ".test",
      std::string(250, 'a') + ".test", std::string(400, 'a') + ".allowed.test"};
  return hosts;
}

const std::vector<std::string> kPorts = {"",       ":443",   ":80",      ":8080",  ":0",
                                         ":65536", ":",      ":+443",    ":0443",  ":-1",
                                         ":4 43",  ":99999", ":443:443", ":0x1bb", ":00080"};

TEST(HostSpelling, DecideAgreesWithTheDaemon) {
  const auto p = make_policy();
  int compared = 0;
  for (const std::string& host : host_spellings()) {
    for (const std::string& port : kPorts) {
      const std::string a = host + port;
      SCOPED_TRACE("authority \"" + a + "\"");
      // CONNECT needs a port; `decide` takes a missing one as 443.
      const std::string connect_target = port.empty() ? a + ":443" : a;
      EXPECT_EQ(daemon_verdict(*p, "CONNECT " + connect_target +
                                       " HTTP/1.1\r\nHost: " + connect_target + "\r\n\r\n"),
                decide_verdict(*p, a))
          << "CONNECT";
      // HTTP/1.0 without Host: the target alone (the Host form follows). decide reads a URL
      // only up to the end of its authority: whitespace in what follows ("allowed.test/:4 43")
      // is the request line's problem, not a host spelling.
      const std::size_t path = a.find_first_of("/?");
      if (path == std::string::npos || a.find_first_of(" \t", path) == std::string::npos) {
        EXPECT_EQ(daemon_verdict(*p, "GET http://" + a + "/x HTTP/1.0\r\n\r\n"),
                  decide_verdict(*p, "http://" + a + "/x"))
            << "absolute form";
      }
      // A Host field is an authority whose missing port means 80.
      EXPECT_EQ(daemon_verdict(*p, "GET /x HTTP/1.1\r\nHost: " + a + "\r\n\r\n"),
                decide_verdict(*p, trim_ows(a) + (port.empty() ? ":80" : "")))
          << "Host field";
      compared += 3;
    }
  }
  EXPECT_GT(compared, 1000);
}

// The spellings the property caught, spelled out: brackets hold an IPv6 literal or nothing
// parses, on both sides.
TEST(HostSpelling, BracketsAroundANameAreRefusedByBoth) {
  const auto p = make_policy();
  EXPECT_EQ(decide_verdict(*p, "[allowed.test]:443"), kRefused);
  EXPECT_EQ(decide_verdict(*p, "https://[allowed.test]/"), kRefused);
  EXPECT_EQ(daemon_verdict(*p, "CONNECT [allowed.test]:443 HTTP/1.1\r\nHost: x\r\n\r\n"), kRefused);
  EXPECT_EQ(decide_verdict(*p, "allowed.test:443"), "allow allowed_by_rule allowed.test:443");
}

}  // namespace
}  // namespace sandgate
