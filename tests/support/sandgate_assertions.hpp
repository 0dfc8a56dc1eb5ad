#pragma once

#include <boost/json/object.hpp>
#include <cstdint>
#include <optional>
#include <string>

#include "gtest/gtest.h"
#include "support/raw_client.hpp"
#include "support/subprocess.hpp"

namespace sandgate::test {

class SandgateProcess;
class HttpOrigin;

// The JSON body of a sandgate error response, or nullopt.
std::optional<boost::json::object> error_body(const HttpResponse& r);

// A string field of the JSON error body (nullopt when absent or the body is not JSON).
std::optional<std::string> error_field(const HttpResponse& r, const std::string& name);

// Checks the error contract: status, `X-Sandgate-Error: CODE`, JSON content type,
// `Connection: close`, and a JSON body with that `code`, the `retryable` flag and a message.
::testing::AssertionResult IsSandgateError(const HttpResponse& r, int status,
                                           const std::string& code, bool retryable);

// Checks an audit line's event.code, event.reason (when given; "-" = must be absent) and
// labels.sandbox_id ("" = must be absent).
::testing::AssertionResult AuditLineIs(const std::optional<boost::json::object>& line,
                                       const std::string& code, const std::string& reason,
                                       const std::string& sandbox);

// The last head's value of a header in curl's -D output ("" when absent).
std::string curl_header(const CurlResult& r, const std::string& name);

// "The daemon keeps serving": a fresh connection's GET http://HOST:PORT/ through the proxy
// returns the origin's 200, and the origin records one more request.
::testing::AssertionResult GoodRequestSucceeds(const SandgateProcess& daemon,
                                               const HttpOrigin& origin, const std::string& host,
                                               const std::string& id, const std::string& token);

// "GET http://AUTHORITY/PATH HTTP/1.1" with Host and Proxy-Authorization (empty id: none).
std::string proxy_get(const std::string& authority, const std::string& path, const std::string& id,
                      const std::string& token, const std::string& extra_headers = {});
// "CONNECT AUTHORITY HTTP/1.1" with Host and Proxy-Authorization.
std::string proxy_connect(const std::string& authority, const std::string& id,
                          const std::string& token);

// Whether SANDGATE_RUN_KNOWN_BUGS=1 asks to run tests that expose known daemon bugs.
bool run_known_bugs();

}  // namespace sandgate::test

// Skips a test that exposes a known, reported daemon bug ("BUG: ..."), unless
// SANDGATE_RUN_KNOWN_BUGS=1 is set (to check a fix). Remove it once the bug is fixed.
#define SANDGATE_KNOWN_BUG(message)                                                \
  do {                                                                             \
    if (!::sandgate::test::run_known_bugs()) GTEST_SKIP() << "BUG: " << (message); \
  } while (0)
