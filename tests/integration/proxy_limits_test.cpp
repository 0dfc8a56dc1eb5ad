// Connection caps: per sandbox and in total, 429 TOO_MANY_CONNECTIONS, released on close.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "support/http_origin.hpp"
#include "support/json_helpers.hpp"
#include "support/raw_client.hpp"
#include "support/sandgate_assertions.hpp"
#include "support/sandgate_process.hpp"

namespace sandgate::test {
namespace {

using namespace std::chrono_literals;

const std::string kToken1 = "tok-limits-one-Bn5q";
const std::string kToken2 = "tok-limits-two-Vc8w";

std::string tables(const HttpOrigin& origin, const std::string& limits) {
  return R"(
[limits]
)" + limits +
         R"(

[dns.hosts]
"origin.test" = ["127.0.0.1"]

[profiles.local]
allow = ["origin.test:)" +
         std::to_string(origin.port()) + R"("]
allow_cidrs = ["127.0.0.0/8"]

[sandboxes.sb1]
profile = "local"
token = ")" +
         kToken1 + R"("

[sandboxes.sb2]
profile = "local"
token = ")" +
         kToken2 + R"("
)";
}

// A kept-alive connection that made one successful request.
RawClient bound_connection(const SandgateProcess& daemon, const HttpOrigin& origin,
                           const std::string& id, const std::string& token) {
  RawClient c(daemon.explicit_port());
  EXPECT_TRUE(
      c.send(proxy_get("origin.test:" + std::to_string(origin.port()), "/hold", id, token)));
  const auto r = c.read_response();
  EXPECT_TRUE(r && r->status == 200);
  return c;
}

TEST(ProxyLimits, PerSandboxCapRefusesTheThirdConnectionWith429UntilOneCloses) {
  HttpOrigin origin;
  // Two workers: the per-sandbox count is shared across threads.
  SandgateProcess daemon(SandgateOptions{tables(origin, "max_connections_per_sandbox = 2"), 2});
  const std::string authority = "origin.test:" + std::to_string(origin.port());

  std::optional<RawClient> first = bound_connection(daemon, origin, "sb1", kToken1);
  RawClient second = bound_connection(daemon, origin, "sb1", kToken1);
  {
    RawClient third(daemon.explicit_port());
    ASSERT_TRUE(third.send(proxy_get(authority, "/third", "sb1", kToken1)));
    const auto r = third.read_response();
    ASSERT_TRUE(r);
    EXPECT_TRUE(IsSandgateError(*r, 429, "TOO_MANY_CONNECTIONS", true));
    EXPECT_EQ(error_field(*r, "sandbox"), "sb1");
    EXPECT_TRUE(third.wait_closed());
  }
  EXPECT_TRUE(AuditLineIs(daemon.wait_audit_code("TOO_MANY_CONNECTIONS"), "TOO_MANY_CONNECTIONS",
                          "-", "sb1"));
  EXPECT_EQ(origin.request_count(), 2u);

  // The cap is per sandbox: sb2 is not affected.
  EXPECT_TRUE(GoodRequestSucceeds(daemon, origin, "origin.test", "sb2", kToken2));

  // Closing one connection frees its slot.
  first.reset();
  bool admitted = false;
  for (int i = 0; i < 100 && !admitted; ++i) {
    RawClient again(daemon.explicit_port());
    again.send(proxy_get(authority, "/again", "sb1", kToken1));
    const auto r = again.read_response();
    admitted = r && r->status == 200;
    if (!admitted) std::this_thread::sleep_for(20ms);
  }
  EXPECT_TRUE(admitted) << "the slot of a closed connection was never released";
}

TEST(ProxyLimits, TotalCapRefusesTheNextConnectionWith429) {
  HttpOrigin origin;
  SandgateProcess daemon(SandgateOptions{tables(origin, "max_connections = 2"), 2});
  RawClient first = bound_connection(daemon, origin, "sb1", kToken1);
  RawClient second = bound_connection(daemon, origin, "sb2", kToken2);
  RawClient third(daemon.explicit_port());
  third.send(proxy_get("origin.test:" + std::to_string(origin.port()), "/", "sb1", kToken1));
  const auto r = third.read_response();
  ASSERT_TRUE(r);
  EXPECT_TRUE(IsSandgateError(*r, 429, "TOO_MANY_CONNECTIONS", true));
  EXPECT_TRUE(third.wait_closed());
  // The line names the sandbox that asked (the cap itself is over all sandboxes).
  EXPECT_TRUE(AuditLineIs(daemon.wait_audit_code("TOO_MANY_CONNECTIONS"), "TOO_MANY_CONNECTIONS",
                          "-", "sb1"));
  EXPECT_EQ(origin.request_count(), 2u);
}

// Opens `n` connections that each send one byte of a request head and then nothing.
std::vector<RawClient> silent_connections(const SandgateProcess& daemon, int n) {
  std::vector<RawClient> out;
  for (int i = 0; i < n; ++i) {
    out.emplace_back(daemon.explicit_port());
    out.back().send("G");
  }
  return out;
}

// Whether every connection in `held` is still open (no byte, no close within 50 ms).
bool all_open(std::vector<RawClient>& held) {
  for (RawClient& c : held) {
    if (c.wait_closed(50ms)) return false;
  }
  return true;
}

// A fresh connection is answered 429 TOO_MANY_CONNECTIONS at once, before it sends a byte.
void expect_next_connection_refused(const SandgateProcess& daemon) {
  RawClient next(daemon.explicit_port());
  const auto r = next.read_response(2000ms);
  ASSERT_TRUE(r) << "the connection over the cap was not refused at once";
  EXPECT_TRUE(IsSandgateError(*r, 429, "TOO_MANY_CONNECTIONS", true));
}

// Connections that never authenticate count only against their own caps: holding many of them
// does not take the capacity of sandboxes that do (they used to fill max_connections, and every
// sandbox got 429 while they were held).
TEST(ProxyLimits, UnauthenticatedConnectionsCannotTakeAuthenticatedCapacity) {
  HttpOrigin origin;
  SandgateProcess daemon(
      SandgateOptions{tables(origin,
                             "max_connections = 4\nmax_unauthenticated_connections = 100\n"
                             "max_unauthenticated_per_source = 100\nauth_timeout_ms = 60000"),
                      2});
  std::vector<RawClient> held = silent_connections(daemon, 20);
  EXPECT_TRUE(GoodRequestSucceeds(daemon, origin, "origin.test", "sb1", kToken1));
  RawClient a = bound_connection(daemon, origin, "sb1", kToken1);
  RawClient b = bound_connection(daemon, origin, "sb2", kToken2);
  EXPECT_EQ(origin.request_count(), 3u);
  EXPECT_TRUE(all_open(held));
}

// One source address may hold only so many unauthenticated connections; the next is refused
// with 429 at once, and an authenticated request from the same address still gets through.
TEST(ProxyLimits, UnauthenticatedConnectionsArePerSourceCapped) {
  HttpOrigin origin;
  SandgateProcess daemon(SandgateOptions{
      tables(origin,
             "max_unauthenticated_connections = 100\nmax_unauthenticated_per_source = 5\n"
             "auth_timeout_ms = 60000"),
      2});
  std::vector<RawClient> held = silent_connections(daemon, 5);
  ASSERT_TRUE(all_open(held));
  expect_next_connection_refused(daemon);
  EXPECT_TRUE(
      AuditLineIs(daemon.wait_audit_code("TOO_MANY_CONNECTIONS"), "TOO_MANY_CONNECTIONS", "-", ""));
  // A slot given back (one closes) lets the next one in, and authentication frees its slot.
  held.pop_back();
  bool admitted = false;
  for (int i = 0; i < 100 && !admitted; ++i) {
    admitted = GoodRequestSucceeds(daemon, origin, "origin.test", "sb1", kToken1);
    if (!admitted) std::this_thread::sleep_for(20ms);
  }
  EXPECT_TRUE(admitted);
  RawClient bound = bound_connection(daemon, origin, "sb1", kToken1);  // authenticated: not pending
  std::vector<RawClient> more = silent_connections(daemon, 1);
  EXPECT_TRUE(all_open(more));
}

// The same cap over all sources together.
TEST(ProxyLimits, UnauthenticatedConnectionsAreCappedInTotal) {
  HttpOrigin origin;
  SandgateProcess daemon(SandgateOptions{
      tables(origin,
             "max_unauthenticated_connections = 3\nmax_unauthenticated_per_source = 100\n"
             "auth_timeout_ms = 60000"),
      2});
  std::vector<RawClient> held = silent_connections(daemon, 3);
  ASSERT_TRUE(all_open(held));
  expect_next_connection_refused(daemon);
}

// A connection that does not authenticate is closed after auth_timeout, well before the
// (longer) header timeout.
TEST(ProxyLimits, UnauthenticatedConnectionsHaveAShortDeadline) {
  HttpOrigin origin;
  SandgateProcess daemon(
      SandgateOptions{tables(origin, "header_timeout_ms = 30000\nauth_timeout_ms = 300"), 2});
  RawClient c(daemon.explicit_port());
  c.send("GET http://origin.test/ HTTP/1.1\r\n");
  const auto started = std::chrono::steady_clock::now();
  const auto r = c.read_response(5000ms);
  ASSERT_TRUE(r);
  EXPECT_TRUE(IsSandgateError(*r, 408, "REQUEST_HEADER_TIMEOUT", true));
  EXPECT_LT(std::chrono::steady_clock::now() - started, 3000ms);
  // An authenticated connection's next request gets the whole header timeout.
  RawClient bound = bound_connection(daemon, origin, "sb1", kToken1);
  bound.send("GET http://origin.test/ HTTP/1.1\r\n");
  EXPECT_FALSE(bound.wait_closed(1000ms));
}

}  // namespace
}  // namespace sandgate::test
