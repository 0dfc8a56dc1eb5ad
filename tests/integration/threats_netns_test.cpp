// THREATS.md rows that aim the daemon at private, metadata and "public" addresses (1, 2, 3, 6,
// 13, 16). Each test re-runs itself in a fresh network namespace that has only a loopback
// interface, so even a daemon bug cannot send a packet off the machine. Inside, the addresses
// an attacker would target are added to lo and a real origin listens on them: a refusal is
// only meaningful if the target would otherwise have answered.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "support/eventually.hpp"
#include "support/http_origin.hpp"
#include "support/json_helpers.hpp"
#include "support/metrics_text.hpp"
#include "support/private_netns.hpp"
#include "support/raw_client.hpp"
#include "support/sandgate_assertions.hpp"
#include "support/sandgate_process.hpp"
#include "support/sequence_dns_server.hpp"
#include "support/subprocess.hpp"

namespace sandgate::test {
namespace {

using namespace std::chrono_literals;

const std::string kToken = "tok-threats-Wd4kS7";

struct Outcome {
  int status = 0;
  std::string code;    // X-Sandgate-Error
  std::string reason;  // body reason
  std::string host;    // body host
  std::string suggestion;
  HttpResponse response;
};

// One GET (or CONNECT) on a fresh connection.
Outcome attempt(const SandgateProcess& daemon, const std::string& authority, bool connect,
                const std::string& id = "sb") {
  RawClient c(daemon.explicit_port());
  c.send(connect ? proxy_connect(authority, id, kToken)
                 : proxy_get(authority, "/probe", id, kToken));
  Outcome out;
  const auto r = c.read_response(std::chrono::milliseconds(5000),
                                 connect ? ResponseTo::connect : ResponseTo::other);
  if (!r) return out;
  out.response = *r;
  out.status = r->status;
  out.code = r->header("X-Sandgate-Error");
  if (const auto body = error_body(*r)) {
    out.reason = json_string(*body, "reason").value_or("");
    out.host = json_string(*body, "host").value_or("");
    out.suggestion = json_string(*body, "suggestion").value_or("");
  }
  return out;
}

// Every attempt must be a 403 SANDBOX_NETWORK_DENIED with this reason, by GET and by CONNECT.
void expect_denied_both_ways(const SandgateProcess& daemon, const std::string& authority,
                             const std::string& reason, const std::string& id = "sb") {
  for (const bool connect : {false, true}) {
    SCOPED_TRACE((connect ? "CONNECT " : "GET ") + authority);
    const Outcome o = attempt(daemon, authority, connect, id);
    EXPECT_TRUE(IsSandgateError(o.response, 403, "SANDBOX_NETWORK_DENIED", false));
    EXPECT_EQ(o.reason, reason);
  }
}

std::string p(std::uint16_t port) {
  return std::to_string(port);
}

// How many host address sets the daemon has published (one stderr event each).
std::size_t host_address_events(const SandgateProcess& daemon) {
  const std::string text = daemon.stderr_text();
  std::size_t n = 0;
  for (auto at = text.find(R"("event":"host_addresses")"); at != std::string::npos;
       at = text.find(R"("event":"host_addresses")", at + 1)) {
    ++n;
  }
  return n;
}

// Waits until the daemon has published more than `seen` host address sets.
bool wait_host_address_events(const SandgateProcess& daemon, std::size_t seen) {
  return eventually([&] { return host_address_events(daemon) > seen; }, 5s);
}

// `ip ARGS...` inside the private namespace.
bool ip(const std::vector<std::string>& args) {
  std::vector<std::string> argv{"ip"};
  argv.insert(argv.end(), args.begin(), args.end());
  const CommandResult r = run_command(argv, 10s);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return r.exit_code == 0;
}

// THREATS 1: an allowed name whose static answer is loopback, RFC 1918 or metadata is refused
// at dial time unless config opens the address; metadata never opens. 10.0.0.1 sits on this
// namespace's lo, so it is an address of the host (THREATS 28): only allow_host_services
// opens it, not even 0.0.0.0/0.
TEST(Threats, NamesResolvingToPrivateOrMetadataAddressesAreRefusedAtDialTime) {
  SANDGATE_IN_PRIVATE_NETNS();
  ASSERT_TRUE(add_loopback_address("10.0.0.1/32"));
  ASSERT_TRUE(add_loopback_address("169.254.169.254/32"));
  HttpOrigin origin("0.0.0.0");
  const std::string port = p(origin.port());
  SandgateProcess daemon(SandgateOptions{R"(
[dns.hosts]
"loop.test" = ["127.0.0.1"]
"private.test" = ["10.0.0.1"]
"meta.test" = ["169.254.169.254"]
"mixed.test" = ["169.254.169.254", "10.0.0.1"]

[sandboxes.sb]
token = ")" + kToken + R"("
allow = ["*.test:)" + port + R"("]

[sandboxes.opened]
token = ")" + kToken + R"("
allow = ["*.test:)" + port + R"("]
allow_cidrs = ["0.0.0.0/0"]
allow_host_services = ["10.0.0.1:)" + port +
                                         R"("]
)"});

  expect_denied_both_ways(daemon, "loop.test:" + port, "special_address");
  expect_denied_both_ways(daemon, "private.test:" + port, "host_address");
  expect_denied_both_ways(daemon, "meta.test:" + port, "always_denied_address");
  expect_denied_both_ways(daemon, "meta.test:" + port, "always_denied_address", "opened");

  const Outcome o = attempt(daemon, "private.test:" + port, false);
  EXPECT_EQ(o.host, "private.test");
  EXPECT_EQ(o.suggestion, "[sandboxes.sb] allow_host_services = [\"10.0.0.1:" + port + "\"]");
  EXPECT_EQ(attempt(daemon, "meta.test:" + port, false).suggestion, "");
  EXPECT_EQ(origin.connection_count(), 0u);

  const auto line = daemon.wait_audit_code("SANDBOX_NETWORK_DENIED", "always_denied_address");
  ASSERT_TRUE(AuditLineIs(line, "SANDBOX_NETWORK_DENIED", "always_denied_address", "sb"));
  EXPECT_EQ(json_string(*line, "destination.address"), "meta.test");

  // With the range opened the same names work, and only the allowed address is dialled: the
  // refusals above are not an unreachable origin.
  Outcome ok = attempt(daemon, "private.test:" + port, false, "opened");
  EXPECT_EQ(ok.status, 200);
  ok = attempt(daemon, "mixed.test:" + port, false, "opened");
  EXPECT_EQ(ok.status, 200);
  const auto requests = origin.requests();
  ASSERT_EQ(requests.size(), 2u);
  for (const auto& r : requests) EXPECT_EQ(r.local_address, "10.0.0.1");
}

// THREATS 1: the name first resolves to a public address, then (TTL 0) rebinds to loopback.
// sandgate must check the address it is about to dial on every lookup.
TEST(Threats, DnsRebindingToLoopbackIsCaughtOnTheNextLookup) {
  SANDGATE_IN_PRIVATE_NETNS();
  ASSERT_TRUE(add_loopback_address("93.184.216.34/32"));  // "public", but only on this lo
  SequenceDnsServer dns({"93.184.216.34", "127.0.0.1"});
  HttpOrigin origin("0.0.0.0");
  const std::string port = p(origin.port());
  SandgateProcess daemon(SandgateOptions{R"(
[dns]
servers = [")" + dns.address() + R"("]
timeout_ms = 1000
max_ttl_s = 0

[sandboxes.sb]
token = ")" + kToken + R"("
allow = ["rebind.test:)" + port + R"("]
allow_host_services = ["93.184.216.34:)" +
                                         port + R"("]
)"});

  const Outcome first = attempt(daemon, "rebind.test:" + port, false);
  EXPECT_EQ(first.status, 200) << first.response.body;
  ASSERT_EQ(origin.request_count(), 1u);
  EXPECT_EQ(origin.requests()[0].local_address, "93.184.216.34");

  expect_denied_both_ways(daemon, "rebind.test:" + port, "special_address");
  EXPECT_EQ(origin.connection_count(), 1u);
  EXPECT_GE(dns.a_queries(), 3u);
  const auto line = daemon.wait_audit_code("SANDBOX_NETWORK_DENIED", "special_address");
  ASSERT_TRUE(AuditLineIs(line, "SANDBOX_NETWORK_DENIED", "special_address", "sb"));
  EXPECT_EQ(json_string(*line, "destination.address"), "rebind.test");
}

// THREATS 2: every spelling of a loopback/unspecified IPv4 address, including IPv6 forms that
// embed it, is an address (never a name) and is refused without allow_cidrs, even with
// allow_all_hosts.
TEST(Threats, Ipv4InIpv6AndOddSpellingsAreAddressesAndAreRefused) {
  SANDGATE_IN_PRIVATE_NETNS();
  ASSERT_TRUE(add_loopback_address("10.0.0.1/32"));
  ASSERT_TRUE(add_loopback_address("100.64.0.1/32"));
  HttpOrigin origin4("0.0.0.0");
  HttpOrigin origin6("::", origin4.port());
  const std::string port = p(origin4.port());
  SandgateProcess daemon(SandgateOptions{R"(
[sandboxes.sb]
token = ")" + kToken + R"("
allow_all_hosts = true
ports = [)" + port + R"(]

[sandboxes.loopback]
token = ")" + kToken + R"("
ports = [)" + port + R"(]
allow_cidrs = ["127.0.0.0/8"]
)"});

  const std::vector<std::pair<std::string, std::string>> cases = {
      {"127.1", "special_address"},
      {"2130706433", "special_address"},
      {"0x7f.1", "special_address"},
      {"0x7f000001", "special_address"},
      {"0177.0.0.1", "special_address"},
      {"127.0.0.1.", "special_address"},
      {"[::ffff:127.0.0.1]", "special_address"},
      {"[::ffff:7f00:1]", "special_address"},
      {"[::127.0.0.1]", "special_address"},
      {"[64:ff9b::7f00:1]", "special_address"},
      {"[2002:7f00:1::]", "special_address"},
      {"[::1]", "special_address"},
      {"[::ffff:10.0.0.1]", "special_address"},
      {"100.64.0.1", "special_address"},
      {"[::ffff:100.64.0.1]", "special_address"},
      {"0", "always_denied_address"},
      {"0.0.0.0", "always_denied_address"},
      {"[::]", "always_denied_address"},
      {"[::ffff:0.0.0.0]", "always_denied_address"},
  };
  for (const auto& [host, reason] : cases)
    expect_denied_both_ways(daemon, host + ":" + port, reason);
  EXPECT_EQ(origin4.connection_count(), 0u);
  EXPECT_EQ(origin6.connection_count(), 0u);

  // The odd spellings mean 127.0.0.1 to sandgate too: where loopback is opened they work.
  for (const std::string host : {"127.1", "2130706433", "0x7f.1"}) {
    EXPECT_EQ(attempt(daemon, host + ":" + port, false, "loopback").status, 200) << host;
  }
  EXPECT_EQ(origin4.request_count(), 3u);
}

// THREATS 3: metadata addresses are refused even when allow_cidrs opens everything.
TEST(Threats, CloudMetadataIsAlwaysRefused) {
  SANDGATE_IN_PRIVATE_NETNS();
  for (const char* a :
       {"169.254.169.254/32", "100.100.100.200/32", "10.0.0.1/32", "fd00:ec2::254/128"}) {
    ASSERT_TRUE(add_loopback_address(a));
  }
  HttpOrigin origin4("0.0.0.0", 80);  // port 80 is free: this namespace is ours alone
  HttpOrigin origin6("::", 80);
  SandgateProcess daemon(SandgateOptions{R"(
[dns.hosts]
"metadata.google.internal" = ["169.254.169.254"]
"imds.test" = ["fd00:ec2::254"]
"mapped.test" = ["::ffff:169.254.169.254"]

[sandboxes.sb]
token = ")" + kToken + R"("
allow_all_hosts = true
allow_cidrs = ["0.0.0.0/0", "::/0"]
allow_host_services = ["10.0.0.1:80"]
)"});

  for (const std::string host : {"169.254.169.254", "[fd00:ec2::254]", "[::ffff:169.254.169.254]",
                                 "[64:ff9b::a9fe:a9fe]", "metadata.google.internal", "imds.test",
                                 "mapped.test", "169.254.1.1", "100.100.100.200", "[fe80::1]"}) {
    expect_denied_both_ways(daemon, host + ":80", "always_denied_address");
  }
  expect_denied_both_ways(daemon, "169.254.169.254:443", "always_denied_address");
  EXPECT_EQ(origin4.connection_count(), 0u);
  EXPECT_EQ(origin6.connection_count(), 0u);

  // The same listener answers on an opened address (of this host, hence the exact key).
  EXPECT_EQ(attempt(daemon, "10.0.0.1:80", false).status, 200);
  EXPECT_EQ(origin4.request_count(), 1u);
}

// THREATS 6: the absolute-form HTTP path and CONNECT get the same decision for every target.
TEST(Threats, PlainHttpIsFilteredExactlyLikeConnect) {
  SANDGATE_IN_PRIVATE_NETNS();
  ASSERT_TRUE(add_loopback_address("10.0.0.1/32"));
  ASSERT_TRUE(add_loopback_address("10.0.0.2/32"));
  ASSERT_TRUE(add_loopback_address("169.254.169.254/32"));
  HttpOrigin origin("0.0.0.0");
  const std::string port = p(origin.port());
  SandgateProcess daemon(SandgateOptions{R"(
[dns.hosts]
"allowed.test" = ["10.0.0.1"]
"denied.test" = ["10.0.0.1"]
"rebound.test" = ["127.0.0.1"]
"meta.test" = ["169.254.169.254"]

[sandboxes.sb]
token = ")" + kToken + R"("
ports = [)" + port + R"(]
allow = ["allowed.test", "rebound.test", "meta.test"]
deny = ["*.denied.test"]
allow_cidrs = ["10.0.0.1/32"]
allow_host_services = ["10.0.0.1:)" + port +
                                         R"("]
)"});

  const std::vector<std::pair<std::string, std::string>> cases = {
      {"denied.test:" + port, "no_matching_rule"},
      {"x.denied.test:" + port, "denied_by_rule"},
      {"allowed.test:1", "port_not_allowed"},
      {"10.0.0.2:" + port, "special_address"},
      {"127.0.0.1:" + port, "special_address"},
      {"rebound.test:" + port, "special_address"},
      {"meta.test:" + port, "always_denied_address"},
      {"169.254.169.254:" + port, "always_denied_address"},
      {"bad_host-.test:" + port, "invalid_host"},
  };
  for (const auto& [authority, reason] : cases) {
    const Outcome get = attempt(daemon, authority, false);
    const Outcome connect = attempt(daemon, authority, true);
    EXPECT_EQ(get.status, 403) << authority;
    EXPECT_EQ(connect.status, 403) << authority;
    EXPECT_EQ(get.reason, reason) << authority;
    EXPECT_EQ(connect.reason, reason) << authority;
  }
  EXPECT_EQ(origin.connection_count(), 0u);

  EXPECT_EQ(attempt(daemon, "allowed.test:" + port, false).status, 200);
  EXPECT_EQ(attempt(daemon, "10.0.0.1:" + port, true).status, 200);
  EXPECT_TRUE(origin.wait_for_connections(2));
}

// THREATS 13: the client's proxy credentials never reach any upstream, by any route.
TEST(Threats, ProxyAuthorizationNeverReachesAnUpstream) {
  SANDGATE_IN_PRIVATE_NETNS();
  HttpOrigin origin;
  origin.set_handler([](const RecordedRequest& r) {
    std::string echo;
    for (const auto& [k, v] : r.headers) echo += k + ": " + v + "\n";
    return OriginReply::with_length(200, echo);
  });
  const std::string authority = "origin.test:" + p(origin.port());
  SandgateProcess daemon(SandgateOptions{R"(
[dns.hosts]
"origin.test" = ["127.0.0.1"]

[sandboxes.sb]
token = ")" + kToken + R"("
allow = [")" + authority + R"("]
allow_cidrs = ["127.0.0.0/8"]
)"});
  const std::string second = "second-Secret-Qm3x";
  std::vector<std::string> echoes;
  auto get = [&](const std::string& extra) {
    RawClient c(daemon.explicit_port());
    c.send("GET http://" + authority + "/ HTTP/1.1\r\nHost: " + authority + "\r\n" +
           proxy_auth_line("sb", kToken) + extra + "\r\n");
    const auto r = c.read_response();
    EXPECT_TRUE(r && r->status == 200);
    if (r) echoes.push_back(r->body);
  };
  get("");
  get("Connection: Proxy-Authorization\r\n");
  get("proxy-authorization: Basic " + base64("sb:" + second) + "\r\n");
  get("Proxy-Connection: keep-alive\r\nProxy-Authenticate: Basic realm=\"x\"\r\n");
  {
    RawClient c(daemon.explicit_port());
    c.send(proxy_connect(authority, "sb", kToken));
    const auto established = c.read_response(3000ms, ResponseTo::connect);
    ASSERT_TRUE(established && established->status == 200);
    c.send("GET /in-tunnel HTTP/1.1\r\nHost: " + authority + "\r\n\r\n");
    const auto r = c.read_response();
    ASSERT_TRUE(r && r->status == 200);
  }
  const auto curl = run_curl({"-x", daemon.proxy_url("sb", kToken), "http://" + authority + "/c"});
  EXPECT_EQ(curl.http_code, 200);
  echoes.push_back(curl.body);
  const auto curl_tunnel =
      run_curl({"-p", "-x", daemon.proxy_url("sb", kToken), "http://" + authority + "/t"});
  EXPECT_EQ(curl_tunnel.http_code, 200);
  echoes.push_back(curl_tunnel.body);

  ASSERT_TRUE(origin.wait_for_requests(7));
  std::string seen = origin.raw_received();
  for (const auto& e : echoes) seen += e;
  std::string lowered = seen;
  for (char& ch : lowered) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  EXPECT_EQ(seen.find(kToken), std::string::npos) << seen;
  EXPECT_EQ(seen.find(base64("sb:" + kToken)), std::string::npos) << seen;
  EXPECT_EQ(seen.find(base64("sb:" + second)), std::string::npos) << seen;
  EXPECT_EQ(lowered.find("proxy-authorization"), std::string::npos) << seen;
  EXPECT_EQ(lowered.find("proxy-authenticate"), std::string::npos) << seen;
}

// THREATS 7: with the listener on 0.0.0.0, every local address is sandgate itself, also one
// in 127/8 that is not an interface address, and one added after startup (as sandgate-launch
// does with veth addresses).
TEST(Threats, EveryLocalAddressOfAWildcardListenerIsAProxyLoop) {
  SANDGATE_IN_PRIVATE_NETNS();
  SandgateOptions options;
  options.explicit_listen = "0.0.0.0:0";
  options.tables = R"(
[sandboxes.sb]
token = ")" + kToken +
                   R"("
)";
  SandgateProcess daemon(options);
  const std::string port = p(daemon.explicit_port());
  std::string error;
  ASSERT_TRUE(daemon.reload(R"(
[sandboxes.sb]
token = ")" + kToken + R"("
ports = [)" + port + R"(]
allow_cidrs = ["127.0.0.0/8", "10.0.0.0/8"]
)",
                            &error))
      << error;
  const std::size_t published = host_address_events(daemon);
  ASSERT_TRUE(add_loopback_address("10.0.0.1/32"));
  ASSERT_TRUE(wait_host_address_events(daemon, published));

  EXPECT_EQ(attempt(daemon, "127.0.0.1:" + port, true).reason, "proxy_loop");
  EXPECT_EQ(attempt(daemon, "127.0.0.2:" + port, true).reason, "proxy_loop");
  EXPECT_EQ(attempt(daemon, "10.0.0.1:" + port, true).reason, "proxy_loop");
}

// THREATS 28: an address of the sandbox host itself (here a public-looking one on an
// interface, safe because this namespace has no route out) is never a destination, whatever
// allow_cidrs or allow_all_hosts say: not by a name that resolves to it, not as a literal, not
// in an IPv6 spelling. An address added after start is refused as soon as the kernel reports
// it, and is an ordinary address again once removed. Only allow_host_services opens one, on
// exactly its port.
TEST(Threats, TheHostsOwnAddressesAreNeverADestination) {
  SANDGATE_IN_PRIVATE_NETNS();
  // A veth pair with both ends here stands for any interface (the kernel may lack "dummy");
  // no IPv6 link-local addresses, so the only address events are the test's own.
  ASSERT_TRUE(ip({"link", "add", "sghost0", "type", "veth", "peer", "name", "sghost1"}));
  for (const char* dev : {"sghost0", "sghost1"}) {
    ASSERT_TRUE(ip({"link", "set", dev, "addrgenmode", "none"}));
    ASSERT_TRUE(ip({"link", "set", dev, "up"}));
  }
  ASSERT_TRUE(ip({"addr", "add", "8.8.4.4/32", "dev", "sghost0"}));
  HttpOrigin origin("0.0.0.0");
  HttpOrigin other("0.0.0.0");
  const std::string port = p(origin.port());
  const std::string port2 = p(other.port());
  SandgateProcess daemon(SandgateOptions{R"(
[limits]
connect_timeout_ms = 1000

[dns.hosts]
"host.attacker.test" = ["8.8.4.4"]
"late.attacker.test" = ["8.8.4.5"]

[sandboxes.wide]
token = ")" + kToken + R"("
allow_all_hosts = true
ports = [)" + port + ", " + port2 + R"(]
allow_cidrs = ["0.0.0.0/0", "::/0"]

[sandboxes.svc]
token = ")" + kToken + R"("
allow_all_hosts = true
ports = [)" + port + ", " + port2 + R"(]
allow_cidrs = ["0.0.0.0/0"]
allow_host_services = ["8.8.4.4:)" + port +
                                         R"("]
)"});

  for (const std::string host : {"host.attacker.test", "8.8.4.4", "[::ffff:8.8.4.4]"}) {
    expect_denied_both_ways(daemon, host + ":" + port, "host_address", "wide");
  }
  const Outcome o = attempt(daemon, "host.attacker.test:" + port, false, "wide");
  EXPECT_EQ(o.host, "host.attacker.test");
  EXPECT_EQ(o.suggestion, "[sandboxes.wide] allow_host_services = [\"8.8.4.4:" + port + "\"]");
  const auto line = daemon.wait_audit_code("SANDBOX_NETWORK_DENIED", "host_address");
  ASSERT_TRUE(AuditLineIs(line, "SANDBOX_NETWORK_DENIED", "host_address", "wide"));
  EXPECT_EQ(origin.connection_count(), 0u);

  // Not yet an address of the host: dialled, and unreachable (no route out of here).
  EXPECT_EQ(attempt(daemon, "late.attacker.test:" + port, false, "wide").code,
            "UPSTREAM_CONNECT_FAILED");
  std::size_t published = host_address_events(daemon);
  ASSERT_TRUE(ip({"addr", "add", "8.8.4.5/32", "dev", "sghost0"}));
  ASSERT_TRUE(wait_host_address_events(daemon, published));
  expect_denied_both_ways(daemon, "late.attacker.test:" + port, "host_address", "wide");
  EXPECT_EQ(origin.connection_count(), 0u);
  published = host_address_events(daemon);
  ASSERT_TRUE(ip({"addr", "del", "8.8.4.5/32", "dev", "sghost0"}));
  ASSERT_TRUE(wait_host_address_events(daemon, published));
  EXPECT_EQ(attempt(daemon, "late.attacker.test:" + port, false, "wide").code,
            "UPSTREAM_CONNECT_FAILED");

  // The exact key opens that address on that port, by name and as a literal; not another port.
  EXPECT_EQ(attempt(daemon, "host.attacker.test:" + port, false, "svc").status, 200);
  EXPECT_EQ(attempt(daemon, "8.8.4.4:" + port, true, "svc").status, 200);
  EXPECT_TRUE(origin.wait_for_connections(2));
  ASSERT_GE(origin.request_count(), 1u);
  EXPECT_EQ(origin.requests()[0].local_address, "8.8.4.4");
  expect_denied_both_ways(daemon, "host.attacker.test:" + port2, "host_address", "svc");
  EXPECT_EQ(other.connection_count(), 0u);
}

// THREATS 16: a refused CONNECT is answered with an explicit 403 at once, never a hang or a
// silent "connected" tunnel; an unroutable allowed address fails fast as well.
TEST(Threats, RefusedConnectIsAnsweredAtOnce) {
  SANDGATE_IN_PRIVATE_NETNS();
  SandgateProcess daemon(SandgateOptions{R"(
[limits]
connect_timeout_ms = 5000

[dns.hosts]
"denied.test" = ["192.0.2.10"]
"blackhole.test" = ["192.0.2.10"]

[sandboxes.sb]
token = ")" + kToken + R"("
allow = ["blackhole.test"]
allow_cidrs = ["192.0.2.0/24"]
)"});
  for (const std::string authority : {"denied.test:443", "198.51.100.7:443", "blackhole.test:22"}) {
    const auto start = std::chrono::steady_clock::now();
    RawClient c(daemon.explicit_port());
    c.send(proxy_connect(authority, "sb", kToken));
    const auto r = c.read_response(3000ms, ResponseTo::connect);
    ASSERT_TRUE(r) << authority;
    EXPECT_TRUE(IsSandgateError(*r, 403, "SANDBOX_NETWORK_DENIED", false)) << authority;
    EXPECT_TRUE(c.wait_closed(1000ms)) << authority;
    EXPECT_LE(std::chrono::steady_clock::now() - start, 1000ms) << authority;
  }
  const auto start = std::chrono::steady_clock::now();
  const Outcome unreachable = attempt(daemon, "blackhole.test:443", true);
  EXPECT_EQ(unreachable.status, 502);
  EXPECT_EQ(unreachable.code, "UPSTREAM_CONNECT_FAILED");
  EXPECT_LE(std::chrono::steady_clock::now() - start, 1000ms);
}

}  // namespace
}  // namespace sandgate::test

namespace sandgate::test {
namespace {

// Hardening issue item 1: a name whose many addresses blackhole SYNs ends within the
// documented bound (at most kMaxDialAttempts addresses, within 2 x connect_timeout), with
// 504 UPSTREAM_TIMEOUT, and no connection is left behind. 198.18.0.0/24 is routed into lo of
// this private namespace, where nothing answers: SYNs vanish.
TEST(Threats, ADialToManyBlackholedAddressesEndsWithinItsBound) {
  SANDGATE_IN_PRIVATE_NETNS();
  ASSERT_TRUE(ip({"route", "add", "198.18.0.0/24", "dev", "lo"}));
  std::string addresses;
  for (int i = 1; i <= 32; ++i) {
    addresses += std::string(i > 1 ? ", " : "") + "\"198.18.0." + std::to_string(i) + "\"";
  }
  SandgateOptions o{R"(
[limits]
connect_timeout_ms = 300

[dns.hosts]
"many.test" = [)" + addresses +
                    R"(]

[sandboxes.sb]
token = ")" + kToken +
                    R"("
allow = ["many.test"]
allow_cidrs = ["198.18.0.0/24"]
)"};
  SandgateProcess daemon(o);
  for (const bool connect : {false, true}) {
    SCOPED_TRACE(connect ? "CONNECT" : "GET");
    const auto started = std::chrono::steady_clock::now();
    const Outcome out = attempt(daemon, "many.test:80", connect);
    const auto took = std::chrono::steady_clock::now() - started;
    EXPECT_TRUE(IsSandgateError(out.response, 504, "UPSTREAM_TIMEOUT", true));
    EXPECT_GE(took, 500ms);   // it did try: two budgets' worth of one connect timeout
    EXPECT_LT(took, 1500ms);  // 32 addresses x 300 ms each would be 9.6 s
  }
  EXPECT_TRUE(daemon.wait_no_connections()) << daemon.metrics_text();
}

}  // namespace
}  // namespace sandgate::test
