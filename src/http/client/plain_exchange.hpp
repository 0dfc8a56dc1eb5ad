#pragma once

// One plain HTTP/1.1 exchange with sandgate's own admin listener, for the tools that talk to a
// running daemon (sandgate-launch, `sandgate holds`): a request, the answer's status and body,
// one deadline for connect, write and read together. Blocking: it runs its own io_context.
// PlainStream reads a long-lived answer (an event stream) piece by piece instead.

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
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

// A GET whose body is read as the server writes it (GET /holds/events), for as long as it
// runs. Blocking; one run at a time; stop() may come from any thread.
class PlainStream {
 public:
  PlainStream();
  ~PlainStream();
  PlainStream(const PlainStream&) = delete;
  PlainStream& operator=(const PlainStream&) = delete;

  // Connects and sends `request` within `connect_timeout`; with a 200 answer, gives each piece
  // of its body to `on_body` as it comes, until the server ends it (status 200, no error), a
  // read waits longer than `idle`, or stop() (error set). Another status: its body (at most
  // 4 KiB) in the answer, and nothing given to `on_body`.
  PlainAnswer run(const std::string& host, std::uint16_t port, PlainRequest request,
                  std::chrono::milliseconds connect_timeout, std::chrono::milliseconds idle,
                  const std::function<void(std::string_view)>& on_body);
  // Ends the run under way (and makes every later one end at once).
  void stop();

  struct Impl;  // the io_context and the stream under way (plain_exchange.cpp)

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace sandgate::http
