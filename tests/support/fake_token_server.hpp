#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "support/temp_dir.hpp"

namespace sandgate::test {

// A request as the fake token endpoint received it.
struct TokenRequest {
  std::string method;
  std::string target;
  std::map<std::string, std::string> headers;  // names lowercased
  std::string body;
};

struct TokenResponse {
  unsigned status = 200;
  std::string body;
  std::string content_type = "application/json";
  std::chrono::milliseconds delay{0};  // before answering
};

// An HTTPS server on 127.0.0.1 (port chosen by the kernel) with a self-signed certificate for
// `names` ("localhost" unless told) and 127.0.0.1: a stand-in for GitHub's API or an OAuth
// token endpoint. Every
// request is recorded, then answered by the handler (which runs on the server's own thread).
// stop() closes the listener (connections are refused afterwards); the port stays known.
// With PlainHttp, the same over plain HTTP: a stand-in for the instance metadata service or
// the container credentials endpoint.
class FakeTokenServer {
 public:
  using Handler = std::function<TokenResponse(const TokenRequest&)>;
  struct PlainHttp {};

  explicit FakeTokenServer(Handler handler, std::vector<std::string> names = {"localhost"});
  FakeTokenServer(Handler handler, PlainHttp);
  ~FakeTokenServer();
  FakeTokenServer(const FakeTokenServer&) = delete;
  FakeTokenServer& operator=(const FakeTokenServer&) = delete;

  std::uint16_t port() const { return port_; }
  std::string url() const { return url_for("localhost"); }
  // "https://HOST:PORT": for a name of the certificate's that the test's DNS points here
  // ("http://..." with PlainHttp).
  std::string url_for(const std::string& host) const {
    return scheme_ + "://" + host + ":" + std::to_string(port_);
  }
  const std::string& ca_file() const { return ca_file_; }  // the certificate, PEM

  std::vector<TokenRequest> requests() const;
  std::size_t request_count() const;
  void set_handler(Handler handler);
  void stop();

 private:
  void start();

  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::string scheme_ = "https";
  std::uint16_t port_ = 0;
  TempDir dir_;
  std::string ca_file_;
};

}  // namespace sandgate::test
