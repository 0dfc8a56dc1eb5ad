#include "h2_fixture.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <charconv>
#include <future>
#include <sstream>

#include "support/subprocess.hpp"

namespace sandgate::h2::test {

LoopbackServer::LoopbackServer(Handler handler, Settings settings)
    : handler_(std::move(handler)),
      settings_(settings),
      acceptor_(ioc_, tcp::endpoint(asio::ip::address_v4::loopback(), 0)) {
  port_ = acceptor_.local_endpoint().port();
  asio::co_spawn(ioc_, accept_loop(), asio::detached);
  thread_ = std::thread([this] { ioc_.run(); });
}

LoopbackServer::~LoopbackServer() {
  asio::post(ioc_, [this] {
    boost::system::error_code ignored;
    acceptor_.close(ignored);
    for (auto& w : live_) {
      if (auto c = w.lock()) c->abort();
    }
  });
  // Every connection's run() returns after its handlers; give them a moment, then stop.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (std::chrono::steady_clock::now() < deadline) {
    std::promise<bool> idle;
    asio::post(ioc_, [&] {
      bool any = false;
      for (auto& w : live_) any = any || !w.expired();
      idle.set_value(!any);
    });
    if (idle.get_future().get()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ioc_.stop();
  thread_.join();
}

std::string LoopbackServer::url(std::string_view path) const {
  return "http://127.0.0.1:" + std::to_string(port_) + std::string(path);
}

void LoopbackServer::on_server(std::function<void()> f) {
  std::promise<void> ran;
  asio::post(ioc_, [&] {
    f();
    ran.set_value();
  });
  ran.get_future().get();
}

void LoopbackServer::shutdown_connections() {
  on_server([this] {
    for (auto& w : live_) {
      if (auto c = w.lock()) c->shutdown();
    }
  });
}

std::vector<boost::system::error_code> LoopbackServer::results() const {
  std::lock_guard lock(mu_);
  return results_;
}

asio::awaitable<void> LoopbackServer::accept_loop() {
  for (;;) {
    auto [ec, socket] = co_await acceptor_.async_accept(use_tuple);
    if (ec) co_return;
    asio::co_spawn(ioc_, serve(std::move(socket)), asio::detached);
  }
}

asio::awaitable<void> LoopbackServer::serve(tcp::socket socket) {
  auto conn = std::make_shared<ServerConnection<tcp::socket>>(socket, settings_);
  live_.push_back(conn);
  conn->on_refused([this](const RequestHead&, int status) {
    if (status == 431) ++refused_431;
    if (status == 405) ++refused_405;
    if (status == 400) ++refused_400;
  });
  const boost::system::error_code ec = co_await conn->run(handler_);
  if (conn->calmed()) ++calmed;
  handler_exceptions += static_cast<int>(conn->handler_exceptions());
  {
    std::lock_guard lock(mu_);
    results_.push_back(ec);
  }
  ++connections_ended;
}

asio::awaitable<void> sleep_for(std::chrono::milliseconds d) {
  const auto ex = co_await asio::this_coro::executor;
  asio::steady_timer t(ex, d);
  co_await t.async_wait(use_tuple);
}

bool run_client(std::function<asio::awaitable<void>()> body, std::chrono::seconds timeout) {
  asio::io_context ioc;
  bool done = false;
  std::exception_ptr failure;
  asio::co_spawn(ioc, body(), [&](std::exception_ptr e) {
    done = true;
    failure = e;
  });
  ioc.run_for(timeout);
  if (failure) {
    try {
      std::rethrow_exception(failure);
    } catch (const std::exception& e) {
      ADD_FAILURE() << "client threw: " << e.what();
    }
    return false;
  }
  EXPECT_TRUE(done) << "client did not finish within " << timeout.count() << " s";
  return done;
}

TestClient::TestClient(tcp::socket s, Settings settings)
    : socket(std::move(s)), conn(socket, settings) {}

asio::awaitable<std::unique_ptr<TestClient>> TestClient::connect(std::uint16_t port,
                                                                 Settings settings) {
  auto ex = co_await asio::this_coro::executor;
  tcp::socket s(ex);
  const tcp::endpoint ep(asio::ip::address_v4::loopback(), port);
  co_await s.async_connect(ep, asio::use_awaitable);
  auto c = std::make_unique<TestClient>(std::move(s), settings);
  c->ended = std::make_unique<detail::Signal>(ex);
  TestClient* raw = c.get();
  asio::co_spawn(ex, raw->conn.run(), [raw](std::exception_ptr, boost::system::error_code ec) {
    raw->done = true;
    raw->result = ec;
    raw->ended->notify();
  });
  co_return c;
}

asio::awaitable<void> TestClient::finish() {
  conn.shutdown();
  while (!done) co_await ended->wait();
}

asio::awaitable<boost::system::error_code> read_all(Exchange& ex, std::string& out,
                                                    std::size_t chunk) {
  std::vector<std::uint8_t> buf(chunk);
  for (;;) {
    auto [ec, n] = co_await ex.read_body(buf);
    if (ec) co_return ec;
    if (n == 0) co_return boost::system::error_code{};
    out.append(reinterpret_cast<const char*>(buf.data()), n);
  }
}

std::map<std::string, std::string> run_peer(const std::vector<std::string>& argv,
                                            std::chrono::seconds timeout) {
  const sandgate::test::CommandResult r = sandgate::test::run_command(argv, timeout);
  std::map<std::string, std::string> kv;
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);) {
    const auto eq = line.find('=');
    if (eq != std::string::npos) kv[line.substr(0, eq)] = line.substr(eq + 1);
  }
  kv["exit"] = std::to_string(r.exit_code);
  if (r.exit_code != 0) kv["stderr"] = r.err + r.out;
  return kv;
}

std::vector<std::string> h2_client(std::vector<std::string> args) {
  std::vector<std::string> argv{"/usr/bin/python3", SANDGATE_H2_PEERS_DIR "/h2_client.py"};
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

BackgroundPeer::BackgroundPeer(const std::vector<std::string>& argv) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return;
  const pid_t parent = ::getpid();
  pid_ = ::fork();
  if (pid_ == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);
    ::dup2(fds[1], 1);
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execvp(args[0], args.data());
    ::_exit(127);
  }
  ::close(fds[1]);
  out_ = fds[0];
}

BackgroundPeer::~BackgroundPeer() {
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  if (out_ >= 0) ::close(out_);
}

std::string BackgroundPeer::ready_line(std::string_view prefix, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    for (auto nl = buffered_.find('\n'); nl != std::string::npos; nl = buffered_.find('\n')) {
      std::string line = buffered_.substr(0, nl);
      buffered_.erase(0, nl + 1);
      if (line.starts_with(prefix)) return line.substr(prefix.size());
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0 || out_ < 0) return {};
    pollfd p{out_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) return {};
    char buf[512];
    const ssize_t n = ::read(out_, buf, sizeof buf);
    if (n <= 0) return {};
    buffered_.append(buf, static_cast<std::size_t>(n));
  }
}

bool wait_listening(std::uint16_t port, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  asio::io_context ioc;
  while (std::chrono::steady_clock::now() < deadline) {
    tcp::socket s(ioc);
    boost::system::error_code ec;
    s.connect(tcp::endpoint(asio::ip::address_v4::loopback(), port), ec);
    if (!ec) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

std::uint16_t free_port() {
  asio::io_context ioc;
  tcp::acceptor a(ioc, tcp::endpoint(asio::ip::address_v4::loopback(), 0));
  return a.local_endpoint().port();
}

PeerOnPort start_on_free_port(
    const std::function<std::vector<std::string>(std::uint16_t)>& argv_for) {
  for (int attempt = 0; attempt < 5; ++attempt) {
    PeerOnPort out;
    out.port = free_port();
    out.peer = std::make_unique<BackgroundPeer>(argv_for(out.port));
    if (wait_listening(out.port, std::chrono::seconds(3))) return out;
  }
  return {};
}

std::string pattern(std::size_t n) {
  std::string s(n, '\0');
  for (std::size_t i = 0; i < n; ++i) s[i] = static_cast<char>(pattern_byte(i));
  return s;
}

namespace {

std::span<const std::uint8_t> bytes_of(std::string_view s) {
  return {reinterpret_cast<const std::uint8_t*>(s.data()), s.size()};
}

asio::awaitable<void> echo(ServerExchange& ex) {
  const Fields head{{"content-type", "application/octet-stream"}};
  co_await ex.send_response_head(200, head, false);
  std::vector<std::uint8_t> buf(16 * 1024);
  for (;;) {
    auto [ec, n] = co_await ex.read_body(buf);
    if (ec) co_return;
    if (n == 0) break;
    const std::span<const std::uint8_t> piece(buf.data(), n);
    const auto r1 = co_await ex.send_data(piece, false);
    if (r1) co_return;
  }
  if (ex.trailers().empty()) {
    const std::span<const std::uint8_t> nothing;
    co_await ex.send_data(nothing, true);
    co_return;
  }
  Fields trailers = ex.trailers();
  trailers.push_back({"grpc-status", "0"});
  co_await ex.send_trailers(trailers);
}

asio::awaitable<void> send_bytes(ServerExchange& ex, std::size_t total) {
  const Fields head{{"content-length", std::to_string(total)}};
  co_await ex.send_response_head(200, head, total == 0);
  const std::string body = pattern(total);
  for (std::size_t off = 0; off < total;) {
    const std::size_t n = std::min<std::size_t>(16 * 1024, total - off);
    const std::span<const std::uint8_t> piece = bytes_of(std::string_view(body).substr(off, n));
    off += n;
    const auto r2 = co_await ex.send_data(piece, off == total);
    if (r2) co_return;
  }
}

}  // namespace

std::atomic<int> endless_cut{0};

asio::awaitable<void> standard_handler(ServerExchange& ex) {
  const RequestHead& r = ex.request();
  if (r.path == "/echo") {
    co_await echo(ex);
    co_return;
  }
  if (r.path == "/size") {
    std::string body;
    const boost::system::error_code ec = co_await read_all(ex, body, 1024);
    if (ec) co_return;
    const Fields head{};
    co_await ex.send_response_head(200, head, false);
    const std::string text = std::to_string(body.size());
    const auto piece = bytes_of(text);
    co_await ex.send_data(piece, true);
    co_return;
  }
  if (r.path.starts_with("/bytes/")) {
    std::size_t n = 0;
    std::from_chars(r.path.data() + 7, r.path.data() + r.path.size(), n);
    co_await send_bytes(ex, n);
    co_return;
  }
  if (r.path == "/endless") {  // sends until the stream fails (at most 10 s)
    const Fields none{};
    co_await ex.send_response_head(200, none, false);
    const std::string piece_text = pattern(16 * 1024);
    const auto piece = bytes_of(piece_text);
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < until) {
      const auto e = co_await ex.send_data(piece, false);
      if (e) {
        ++endless_cut;
        break;
      }
    }
    co_return;
  }
  if (r.path == "/hold-body") {  // never reads: the client's upload must stall
    constexpr std::chrono::milliseconds kPoll{10};
    for (int i = 0; i < 1000 && !ex.closed(); ++i) co_await sleep_for(kPoll);
    co_return;
  }
  if (r.path == "/head") {
    const Fields head{{"x-request-method", r.method},
                      {"x-request-scheme", r.scheme},
                      {"x-request-authority", r.authority},
                      {"x-request-fields", std::to_string(r.fields.size())}};
    co_await ex.send_response_head(200, head, true);
    co_return;
  }
  const Fields none{};
  co_await ex.send_response_head(404, none, true);
}

}  // namespace sandgate::h2::test
