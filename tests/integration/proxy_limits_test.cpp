// Connection caps: per sandbox and in total, 429 TOO_MANY_CONNECTIONS, released on close.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <thread>

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
  EXPECT_TRUE(
      AuditLineIs(daemon.wait_audit_code("TOO_MANY_CONNECTIONS"), "TOO_MANY_CONNECTIONS", "-", ""));
  EXPECT_EQ(origin.request_count(), 2u);
}

}  // namespace
}  // namespace sandgate::test
