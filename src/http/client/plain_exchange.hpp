#pragma once

// One plain HTTP/1.1 exchange with sandgate's own admin listener, for the tools that talk to a
// running daemon (sandgate-launch, `sandgate holds`): a request, the answer's status and body,
// one deadline for connect, write and read together. Blocking: it runs its own io_context.

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace sandgate::http {

struct PlainRequest {
  std::string method = "GET";
  std::string target;
  std::vector<std::pair<std::string, std::string>> fields;
  std::string body;
};

// The answer: its status and body, or why there is none (status 0, `error`).
struct PlainAnswer {
  unsigned status = 0;
  std::string body;
  std::string error;
};

// `host` is an IP literal; the body read is at most `max_body` bytes.
PlainAnswer plain_exchange(const std::string& host, std::uint16_t port, PlainRequest request,
                           std::chrono::milliseconds timeout, std::size_t max_body = 1024 * 1024);

}  // namespace sandgate::http
