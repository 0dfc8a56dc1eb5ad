#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <string>

#include "support/fake_token_server.hpp"

namespace sandgate::test {

// The instance metadata service of an EC2 instance that requires IMDSv2 (HttpTokens=required),
// over plain HTTP on 127.0.0.1, refusing what it refuses: PUT /latest/api/token with a TTL of
// 1-21600 s gives a session token (400 without a valid TTL; 403 when the PUT carries
// X-Forwarded-For, which only a proxy adds); every GET without a valid, unexpired session token
// is 401, IMDSv1 included. The instance has one role; /latest/meta-data/iam/security-
// credentials/ lists it and .../ROLE answers `keys(n)` on the n-th read.
class FakeImds {
 public:
  using Clock = std::function<std::chrono::system_clock::time_point()>;
  using Keys = std::function<std::string(int n)>;  // IMDS's JSON body for the n-th read

  FakeImds(std::string role, Clock clock, Keys keys);

  FakeTokenServer& server() { return server_; }
  std::string url() const { return server_.url_for("127.0.0.1"); }
  int sessions_given() const;
  int keys_given() const;
  // As after a restart of the service: every session token given so far is unknown.
  void forget_sessions();
  // What it answers `r`, for a request the test makes by hand (IMDSv1's GET).
  TokenResponse answer(const TokenRequest& r);

 private:
  std::string role_;
  Clock clock_;
  Keys keys_;
  mutable std::mutex mutex_;
  std::map<std::string, std::chrono::system_clock::time_point> sessions_;
  int sessions_given_ = 0;
  int keys_given_ = 0;
  FakeTokenServer server_;  // last: its thread calls answer()
};

}  // namespace sandgate::test
