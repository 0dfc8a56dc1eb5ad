#pragma once

// Test support for the h2 codec: a ServerConnection on 127.0.0.1 (port 0) served from its own
// thread, handlers the tests share, and a way to run a client coroutine to completion.

#include <atomic>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "h2/connection.hpp"

namespace sandgate::h2::test {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);

using Handler = std::function<asio::awaitable<void>(ServerExchange&)>;

// A loopback HTTP/2 (h2c, prior knowledge) server. Every accepted connection gets a
// ServerConnection with `settings` and `handler`.
class LoopbackServer {
 public:
  explicit LoopbackServer(Handler handler, Settings settings = {});
  ~LoopbackServer();
  LoopbackServer(const LoopbackServer&) = delete;
  LoopbackServer& operator=(const LoopbackServer&) = delete;

  std::uint16_t port() const { return port_; }
  std::string url(std::string_view path = "/") const;
  // Runs f on the server's thread (GOAWAY from a test, say) and returns once it ran.
  void on_server(std::function<void()> f);
  // Sends GOAWAY (graceful) on every live connection.
  void shutdown_connections();

  // What the connections did, once each run() returned.
  std::atomic<int> connections_ended{0};
  std::atomic<int> calmed{0};  // ended by a limit of our own (abnormal ends, empty frames)
  std::atomic<int> handler_exceptions{0};
  std::atomic<int> refused_431{0};  // on_refused calls, by status
  std::atomic<int> refused_405{0};
  std::atomic<int> refused_400{0};
  std::vector<boost::system::error_code> results() const;

 private:
  asio::awaitable<void> accept_loop();
  asio::awaitable<void> serve(tcp::socket socket);

  Handler handler_;
  Settings settings_;
  asio::io_context ioc_;
  asio::executor_work_guard<asio::io_context::executor_type> work_{ioc_.get_executor()};
  tcp::acceptor acceptor_;
  std::uint16_t port_ = 0;
  std::vector<std::weak_ptr<ServerConnection<tcp::socket>>> live_;  // server thread only
  mutable std::mutex mu_;
  std::vector<boost::system::error_code> results_;
  std::thread thread_;
};

// Waits `d` on the current coroutine's executor.
asio::awaitable<void> sleep_for(std::chrono::milliseconds d);

// Runs `body` on a fresh io_context in this thread until it completes, at most `timeout`;
// false (and a gtest failure) when it did not finish or threw.
bool run_client(std::function<asio::awaitable<void>()> body,
                std::chrono::seconds timeout = std::chrono::seconds(20));

// A client connection to 127.0.0.1:port, run() spawned; finish() sends GOAWAY and waits for
// run() to return.
struct TestClient {
  explicit TestClient(tcp::socket s, Settings settings = {});
  static asio::awaitable<std::unique_ptr<TestClient>> connect(std::uint16_t port,
                                                              Settings settings = {});
  asio::awaitable<void> finish();

  tcp::socket socket;
  ClientConnection<tcp::socket> conn;
  bool done = false;
  boost::system::error_code result;
  std::unique_ptr<detail::Signal> ended;
};

// Reads a body to its end (into `out`), reading at most `chunk` bytes at a time.
asio::awaitable<boost::system::error_code> read_all(Exchange& ex, std::string& out,
                                                    std::size_t chunk = 16 * 1024);

// The shared handler: paths
//   /echo          200, the request body streamed back, the request's trailers echoed back
//                  as trailers with grpc-status: 0 added when there were any
//   /size          200, body = the number of request body bytes, read 1 KiB at a time
//   /bytes/N       200, N bytes of pattern() sent in 16 KiB pieces
//   /endless       200, body sent until the stream fails (at most 10 s)
//   /hold-body     never reads the body nor answers, until the stream closes (at most 10 s)
//   /head          200 without a body, x-request-* fields naming what arrived
//   anything else  404
asio::awaitable<void> standard_handler(ServerExchange& ex);
// How many /endless responses ended because their stream failed (not by the 10 s cap).
extern std::atomic<int> endless_cut;

// Runs a peer command and returns its key=value output lines as a map ("exit" holds the exit
// code).
std::map<std::string, std::string> run_peer(
    const std::vector<std::string>& argv, std::chrono::seconds timeout = std::chrono::seconds(30));
// argv for tests/unit/h2/peers/h2_client.py (Debian's python3, which has python3-h2).
std::vector<std::string> h2_client(std::vector<std::string> args);

// A peer server run in the background (killed and reaped by the destructor, and with the test
// process by PR_SET_PDEATHSIG). ready_line() waits for a line starting with `prefix` on its
// stdout and returns the rest.
class BackgroundPeer {
 public:
  explicit BackgroundPeer(const std::vector<std::string>& argv);
  ~BackgroundPeer();
  BackgroundPeer(const BackgroundPeer&) = delete;
  BackgroundPeer& operator=(const BackgroundPeer&) = delete;
  std::string ready_line(std::string_view prefix,
                         std::chrono::milliseconds timeout = std::chrono::seconds(10));

 private:
  int pid_ = -1;
  int out_ = -1;
  std::string buffered_;
};

// Waits until 127.0.0.1:port accepts a TCP connection.
bool wait_listening(std::uint16_t port,
                    std::chrono::milliseconds timeout = std::chrono::seconds(10));
// A free loopback port (bound and released at once; for peers that take a port argument).
std::uint16_t free_port();

// A peer listening on a free loopback port: `argv_for(port)` is started on one until it listens
// (another process may take a port between free_port() and the peer's bind; then the next is
// tried). The peer is null when five ports in a row failed.
struct PeerOnPort {
  std::unique_ptr<BackgroundPeer> peer;
  std::uint16_t port = 0;
};
PeerOnPort start_on_free_port(
    const std::function<std::vector<std::string>(std::uint16_t)>& argv_for);

// Deterministic body bytes: byte i is pattern_byte(i).
inline std::uint8_t pattern_byte(std::size_t i) {
  return static_cast<std::uint8_t>(i * 7 + i / 251);
}
std::string pattern(std::size_t n);

}  // namespace sandgate::h2::test
