#include "support/fake_imds.hpp"

namespace sandgate::test {

namespace {

std::string header_of(const TokenRequest& r, const std::string& name) {
  const auto it = r.headers.find(name);
  return it == r.headers.end() ? std::string() : it->second;
}

}  // namespace

FakeImds::FakeImds(std::string role, Clock clock, Keys keys)
    : role_(std::move(role)),
      clock_(std::move(clock)),
      keys_(std::move(keys)),
      server_([this](const TokenRequest& r) { return answer(r); }, FakeTokenServer::PlainHttp{}) {}

int FakeImds::sessions_given() const {
  const std::lock_guard lock(mutex_);
  return sessions_given_;
}

int FakeImds::keys_given() const {
  const std::lock_guard lock(mutex_);
  return keys_given_;
}

void FakeImds::forget_sessions() {
  const std::lock_guard lock(mutex_);
  sessions_.clear();
}

TokenResponse FakeImds::answer(const TokenRequest& r) {
  const std::lock_guard lock(mutex_);
  if (r.method == "PUT" && r.target == "/latest/api/token") {
    if (!header_of(r, "x-forwarded-for").empty()) return {403, "Forbidden", "text/plain"};
    const std::string ttl = header_of(r, "x-aws-ec2-metadata-token-ttl-seconds");
    const bool digits =
        !ttl.empty() && ttl.size() <= 5 && ttl.find_first_not_of("0123456789") == std::string::npos;
    const int seconds = digits ? std::stoi(ttl) : 0;
    if (seconds < 1 || seconds > 21600) return {400, "Bad Request", "text/plain"};
    const std::string token = "AQAEAImdsSessionToken" + std::to_string(++sessions_given_) + "==";
    sessions_[token] = clock_() + std::chrono::seconds(seconds);
    return {200, token, "text/plain"};
  }
  if (r.method != "GET") return {405, "Method Not Allowed", "text/plain"};
  const auto session = sessions_.find(header_of(r, "x-aws-ec2-metadata-token"));
  if (session == sessions_.end() || clock_() >= session->second) {
    return {401, "Unauthorized", "text/plain"};
  }
  const std::string roles = "/latest/meta-data/iam/security-credentials/";
  if (r.target == roles) return {200, role_, "text/plain"};
  if (r.target == roles + role_) return {200, keys_(++keys_given_)};
  return {404, "Not Found", "text/html"};
}

}  // namespace sandgate::test
