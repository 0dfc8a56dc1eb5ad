#include "support/sandgate_assertions.hpp"

#include <algorithm>
#include <boost/json/serialize.hpp>
#include <cstdlib>

#include "support/http_origin.hpp"
#include "support/json_helpers.hpp"
#include "support/sandgate_process.hpp"

namespace sandgate::test {

namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

}  // namespace

bool run_known_bugs() {
  const char* v = std::getenv("SANDGATE_RUN_KNOWN_BUGS");
  return v && std::string(v) == "1";
}

std::optional<boost::json::object> error_body(const HttpResponse& r) {
  return parse_object(r.body);
}

std::optional<std::string> error_field(const HttpResponse& r, const std::string& name) {
  const auto body = error_body(r);
  return body ? json_string(*body, name) : std::nullopt;
}

::testing::AssertionResult IsSandgateError(const HttpResponse& r, int status,
                                           const std::string& code, bool retryable) {
  auto fail = [&](const std::string& what) {
    return ::testing::AssertionFailure()
           << what << "\n  status " << r.status << ", X-Sandgate-Error '"
           << r.header("X-Sandgate-Error") << "', body: " << r.body;
  };
  if (r.status != status) return fail("expected status " + std::to_string(status));
  if (r.header_count("X-Sandgate-Error") != 1 || r.header("X-Sandgate-Error") != code) {
    return fail("expected exactly one X-Sandgate-Error: " + code);
  }
  if (r.header("Content-Type") != "application/json") return fail("expected JSON content type");
  if (lower(r.header("Connection")) != "close") return fail("expected Connection: close");
  const auto body = error_body(r);
  if (!body) return fail("body is not a JSON object");
  if (json_string(*body, "code") != code) return fail("body code is not " + code);
  const auto* retry = json_at(*body, "retryable");
  if (!retry || !retry->is_bool() || retry->as_bool() != retryable) {
    return fail(std::string("body retryable is not ") + (retryable ? "true" : "false"));
  }
  if (!json_string(*body, "message")) return fail("body has no message");
  // The reason phrase carries the verdict too (proxy::reason_phrase), for clients that print
  // only the status line.
  const std::string verdict = retryable ? "(retryable)" : "not retryable)";
  if (!r.reason.starts_with(code) || !r.reason.ends_with(verdict) || r.reason.size() > 160) {
    return fail("reason phrase '" + r.reason + "' does not say " + code + " ... " + verdict);
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult AuditLineIs(const std::optional<boost::json::object>& line,
                                       const std::string& code, const std::string& reason,
                                       const std::string& sandbox) {
  if (!line) return ::testing::AssertionFailure() << "no audit line with event.code " << code;
  const std::string text = boost::json::serialize(*line);
  if (json_string(*line, "event.code") != code) {
    return ::testing::AssertionFailure() << "event.code is not " << code << ": " << text;
  }
  const auto got_reason = json_string(*line, "event.reason");
  if (reason == "-" && got_reason) {
    return ::testing::AssertionFailure() << "unexpected event.reason: " << text;
  }
  if (!reason.empty() && reason != "-" && got_reason != reason) {
    return ::testing::AssertionFailure() << "event.reason is not " << reason << ": " << text;
  }
  const auto got_sandbox = json_string(*line, "labels.sandbox_id");
  if (sandbox.empty() ? got_sandbox.has_value() : got_sandbox != sandbox) {
    return ::testing::AssertionFailure()
           << "labels.sandbox_id is not '" << sandbox << "': " << text;
  }
  if (!json_string(*line, "@timestamp")) {
    return ::testing::AssertionFailure() << "no @timestamp: " << text;
  }
  return ::testing::AssertionSuccess();
}

std::string curl_header(const CurlResult& r, const std::string& name) {
  // Heads are separated by blank lines; the last one is the final response.
  std::string value;
  std::size_t pos = 0;
  const std::string want = lower(name) + ":";
  bool new_head = true;
  while (pos < r.headers.size()) {
    auto eol = r.headers.find('\n', pos);
    if (eol == std::string::npos) eol = r.headers.size();
    std::string line = r.headers.substr(pos, eol - pos);
    pos = eol + 1;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) {
      new_head = true;
      continue;
    }
    if (new_head) {
      value.clear();
      new_head = false;
    }
    if (lower(line.substr(0, want.size())) == want) {
      value = line.substr(want.size());
      value.erase(0, value.find_first_not_of(' '));
    }
  }
  return value;
}

std::string proxy_get(const std::string& authority, const std::string& path, const std::string& id,
                      const std::string& token, const std::string& extra_headers) {
  return "GET http://" + authority + path + " HTTP/1.1\r\nHost: " + authority + "\r\n" +
         (id.empty() ? std::string() : proxy_auth_line(id, token)) + extra_headers + "\r\n";
}

std::string proxy_connect(const std::string& authority, const std::string& id,
                          const std::string& token) {
  return "CONNECT " + authority + " HTTP/1.1\r\nHost: " + authority + "\r\n" +
         (id.empty() ? std::string() : proxy_auth_line(id, token)) + "\r\n";
}

::testing::AssertionResult GoodRequestSucceeds(const SandgateProcess& daemon,
                                               const HttpOrigin& origin, const std::string& host,
                                               const std::string& id, const std::string& token) {
  const std::size_t before = origin.request_count();
  try {
    RawClient client(daemon.explicit_port());
    const std::string authority = host + ":" + std::to_string(origin.port());
    client.send(proxy_get(authority, "/still-serving", id, token));
    const auto r = client.read_response();
    if (!r) return ::testing::AssertionFailure() << "no response to a good request";
    if (r->status != 200) {
      return ::testing::AssertionFailure() << "good request got " << r->status << ": " << r->body;
    }
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << "the daemon stopped serving: " << e.what();
  }
  if (origin.request_count() != before + 1) {
    return ::testing::AssertionFailure() << "origin did not record the good request";
  }
  return ::testing::AssertionSuccess();
}

}  // namespace sandgate::test
