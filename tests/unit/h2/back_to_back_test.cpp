// ServerConnection against ClientConnection over loopback TCP (h2c, prior knowledge): many
// streams at once, bounded buffering with a slow reader both ways, trailers both ways, the
// peer's stream limit, and GOAWAY on the client side.
#include <gtest/gtest.h>

#include <boost/asio/experimental/awaitable_operators.hpp>

#include "h2_fixture.hpp"

namespace sandgate::h2::test {
namespace {

using namespace std::chrono_literals;
constexpr std::chrono::milliseconds kPoll{5};
constexpr std::chrono::milliseconds kSettle{400};  // long enough for loopback to fill every window
constexpr std::chrono::milliseconds kBusy{30};

std::span<const std::uint8_t> bytes_of(std::string_view s) {
  return {reinterpret_cast<const std::uint8_t*>(s.data()), s.size()};
}

RequestHead get(std::uint16_t port, std::string path) {
  return RequestHead{"GET", "http", "127.0.0.1:" + std::to_string(port), std::move(path), {}};
}

RequestHead post(std::uint16_t port, std::string path) {
  RequestHead h{"POST", "http", "127.0.0.1:" + std::to_string(port), std::move(path), {}};
  h.fields.push_back({"content-type", "application/octet-stream"});
  return h;
}

TEST(H2BackToBack, ManyConcurrentStreamsEachGetTheirOwnBody) {
  LoopbackServer server(standard_handler);
  const std::uint16_t port = server.port();
  constexpr int kStreams = 60;
  int ok = 0;
  ASSERT_TRUE(run_client([&]() -> asio::awaitable<void> {
    auto client = co_await TestClient::connect(port);
    auto one = [&](int i) -> asio::awaitable<void> {
      const RequestHead head = post(port, "/echo");
      auto ex_r = co_await client->conn.request(head, false);
      if (!ex_r) co_return;
      ClientExchange ex = std::move(*ex_r);
      const std::string body = "stream " + std::to_string(i) + " " + pattern(1000 + 37 * i);
      const auto piece = bytes_of(body);
      co_await ex.send_data(piece, true);
      const auto r1 = co_await ex.read_response_head();
      if (r1) co_return;
      std::string got;
      const auto r2 = co_await read_all(ex, got);
      if (r2) co_return;
      if (ex.response().status == 200 && got == body) ++ok;
    };
    auto ex = co_await asio::this_coro::executor;
    int finished = 0;
    detail::Signal all(ex);
    for (int i = 0; i < kStreams; ++i) {
      asio::co_spawn(ex, one(i), [&](std::exception_ptr) {
        ++finished;
        all.notify();
      });
    }
    while (finished < kStreams) co_await all.wait();
    co_await client->finish();
  }));
  EXPECT_EQ(ok, kStreams);
}

TEST(H2BackToBack, ClientWaitsForTheServersStreamLimit) {
  std::atomic<int> active{0};
  std::atomic<int> most{0};
  Settings small;
  small.max_concurrent_streams = 2;
  LoopbackServer server(
      [&](ServerExchange& ex) -> asio::awaitable<void> {
        const int now = ++active;
        for (int m = most; now > m && !most.compare_exchange_weak(m, now);) {
        }
        co_await sleep_for(kBusy);
        --active;
        const Fields none{};
        co_await ex.send_response_head(204, none, true);
      },
      small);
  const std::uint16_t port = server.port();
  int ok = 0;
  ASSERT_TRUE(run_client([&]() -> asio::awaitable<void> {
    auto client = co_await TestClient::connect(port);
    auto ex = co_await asio::this_coro::executor;
    int finished = 0;
    detail::Signal all(ex);
    auto one = [&]() -> asio::awaitable<void> {  // outlives the coroutines made from it
      const RequestHead head = get(port, "/");
      auto x_r = co_await client->conn.request(head, true);
      if (!x_r) co_return;
      ClientExchange x = std::move(*x_r);
      const auto r3 = co_await x.read_response_head();
      if (!r3 && x.response().status == 204) ++ok;
    };
    for (int i = 0; i < 8; ++i) {
      asio::co_spawn(ex, one(), [&](std::exception_ptr) {
        ++finished;
        all.notify();
      });
    }
    while (finished < 8) co_await all.wait();
    co_await client->finish();
  }));
  EXPECT_EQ(ok, 8);
  EXPECT_EQ(most.load(), 2);  // never more than the server allowed, and it was used
}

// The server does not read the request body until told: the client's send_data must stall
// within the server's stream window, then everything arrives once the server reads.
TEST(H2BackToBack, SlowServerReaderStallsTheClientsUpload) {
  Settings settings;  // 256 KiB stream window
  std::atomic<bool> start_reading{false};
  std::atomic<std::size_t> received{0};
  std::atomic<bool> intact{false};
  LoopbackServer server(
      [&](ServerExchange& ex) -> asio::awaitable<void> {
        while (!start_reading) {
          co_await sleep_for(kPoll);
        }
        std::string body;
        const auto r4 = co_await read_all(ex, body);
        if (r4) co_return;
        received = body.size();
        intact = body == pattern(body.size());
        const Fields none{};
        co_await ex.send_response_head(200, none, true);
      },
      settings);
  const std::uint16_t port = server.port();
  constexpr std::size_t kTotal = 8 << 20;
  std::size_t accepted_while_stalled = 0;
  int status = 0;
  ASSERT_TRUE(run_client([&]() -> asio::awaitable<void> {
    auto client = co_await TestClient::connect(port);
    const RequestHead head = post(port, "/upload");
    auto ex_r = co_await client->conn.request(head, false);
    if (!ex_r) co_return;
    ClientExchange ex = std::move(*ex_r);
    const std::string body = pattern(kTotal);
    std::size_t accepted = 0;
    auto upload = [&]() -> asio::awaitable<void> {
      while (accepted < kTotal) {
        const std::size_t n = std::min<std::size_t>(32 * 1024, kTotal - accepted);
        const auto piece = bytes_of(std::string_view(body).substr(accepted, n));
        const auto r5 = co_await ex.send_data(piece, accepted + n == kTotal);
        if (r5) co_return;
        accepted += n;
      }
    };
    auto ex2 = co_await asio::this_coro::executor;
    bool uploaded = false;
    detail::Signal up_done(ex2);
    asio::co_spawn(ex2, upload(), [&](std::exception_ptr) {
      uploaded = true;
      up_done.notify();
    });
    co_await sleep_for(kSettle);
    accepted_while_stalled = accepted;
    start_reading = true;
    while (!uploaded) co_await up_done.wait();
    const auto r6 = co_await ex.read_response_head();
    if (!r6) status = ex.response().status;
    co_await client->finish();
  }));
  // At most the stream window plus the piece nghttp2 was taking when it ran out.
  EXPECT_GT(accepted_while_stalled, 0u);
  EXPECT_LE(accepted_while_stalled, static_cast<std::size_t>(settings.stream_window) + 32 * 1024);
  EXPECT_EQ(received.load(), kTotal);
  EXPECT_TRUE(intact);
  EXPECT_EQ(status, 200);
}

// The client does not read the response: the server's send_data stalls within the client's
// stream window.
TEST(H2BackToBack, SlowClientReaderStallsTheServersDownload) {
  constexpr std::size_t kTotal = 8 << 20;
  std::atomic<std::size_t> sent{0};
  LoopbackServer server([&](ServerExchange& ex) -> asio::awaitable<void> {
    const Fields none{};
    co_await ex.send_response_head(200, none, false);
    const std::string body = pattern(kTotal);
    for (std::size_t off = 0; off < kTotal;) {
      const std::size_t n = std::min<std::size_t>(32 * 1024, kTotal - off);
      const auto piece = bytes_of(std::string_view(body).substr(off, n));
      const auto r7 = co_await ex.send_data(piece, off + n == kTotal);
      if (r7) co_return;
      off += n;
      sent = off;
    }
  });
  const std::uint16_t port = server.port();
  Settings client_settings;
  client_settings.stream_window = 128 * 1024;
  std::size_t sent_while_stalled = 0;
  std::string got;
  ASSERT_TRUE(run_client([&]() -> asio::awaitable<void> {
    auto client = co_await TestClient::connect(port, client_settings);
    const RequestHead head = get(port, "/download");
    auto ex_r = co_await client->conn.request(head, true);
    if (!ex_r) co_return;
    ClientExchange ex = std::move(*ex_r);
    const auto r8 = co_await ex.read_response_head();
    if (r8) co_return;
    co_await sleep_for(kSettle);
    sent_while_stalled = sent;
    co_await read_all(ex, got);
    co_await client->finish();
  }));
  EXPECT_GT(sent_while_stalled, 0u);
  EXPECT_LE(sent_while_stalled, client_settings.stream_window + 32 * 1024u);
  EXPECT_EQ(got.size(), kTotal);
  EXPECT_TRUE(got == pattern(kTotal));
}

// gRPC's shape: a streamed request body ending in trailers, a response ending in trailers
// with grpc-status.
TEST(H2BackToBack, TrailersGoBothWays) {
  LoopbackServer server(standard_handler);
  const std::uint16_t port = server.port();
  std::string got;
  Fields response_trailers;
  int status = 0;
  ASSERT_TRUE(run_client([&]() -> asio::awaitable<void> {
    auto client = co_await TestClient::connect(port);
    RequestHead head = post(port, "/echo");
    head.fields = {{"content-type", "application/grpc"}, {"te", "trailers"}};
    auto ex_r = co_await client->conn.request(head, false);
    if (!ex_r) co_return;
    ClientExchange ex = std::move(*ex_r);
    for (int i = 0; i < 5; ++i) {
      const std::string msg = "message-" + std::to_string(i) + ";";
      const auto piece = bytes_of(msg);
      co_await ex.send_data(piece, false);
    }
    const Fields trailers{{"x-checksum", "abc"}};
    const auto r9 = co_await ex.send_trailers(trailers);
    if (r9) co_return;
    const auto r10 = co_await ex.read_response_head();
    if (r10) co_return;
    status = ex.response().status;
    const auto r11 = co_await read_all(ex, got);
    if (r11) co_return;
    response_trailers = ex.trailers();
    co_await client->finish();
  }));
  EXPECT_EQ(status, 200);
  EXPECT_EQ(got, "message-0;message-1;message-2;message-3;message-4;");
  const Fields expected{{"x-checksum", "abc"}, {"grpc-status", "0"}};
  EXPECT_EQ(response_trailers, expected);
}

// GOAWAY from the server: the stream in flight finishes, a new request fails with goaway.
TEST(H2BackToBack, ClientAfterGoawayFinishesInFlightAndRefusesNew) {
  std::atomic<bool> release{false};
  std::atomic<bool> holding{false};
  LoopbackServer server([&](ServerExchange& ex) -> asio::awaitable<void> {
    holding = true;
    while (!release) co_await sleep_for(kPoll);
    const Fields none{};
    co_await ex.send_response_head(200, none, false);
    const auto piece = bytes_of("done");
    co_await ex.send_data(piece, true);
  });
  const std::uint16_t port = server.port();
  boost::system::error_code late;
  std::string body;
  int status = 0;
  ASSERT_TRUE(run_client([&]() -> asio::awaitable<void> {
    auto client = co_await TestClient::connect(port);
    const RequestHead head = get(port, "/hold");
    auto ex_r = co_await client->conn.request(head, true);
    if (!ex_r) co_return;
    ClientExchange ex = std::move(*ex_r);
    while (!holding) co_await sleep_for(kPoll);
    server.shutdown_connections();
    while (!client->conn.goaway_received()) co_await sleep_for(kPoll);
    auto second = co_await client->conn.request(head, true);
    if (!second) late = second.error();
    release = true;
    const auto r12 = co_await ex.read_response_head();
    if (r12) co_return;
    status = ex.response().status;
    co_await read_all(ex, body);
    while (!client->done) co_await client->ended->wait();  // the connection ends by itself
  }));
  EXPECT_EQ(late, make_error_code(Error::goaway));
  EXPECT_EQ(status, 200);
  EXPECT_EQ(body, "done");
}

// A client that drops an exchange mid-response frees its stream: with one stream allowed,
// the next request still gets through.
TEST(H2BackToBack, DroppedClientExchangeFreesItsStream) {
  Settings one;
  one.max_concurrent_streams = 1;
  LoopbackServer server(standard_handler, one);
  const std::uint16_t port = server.port();
  std::string first_part;
  int status = 0;
  const int cut_before = endless_cut;
  ASSERT_TRUE(run_client([&]() -> asio::awaitable<void> {
    auto client = co_await TestClient::connect(port);
    {
      const RequestHead big = get(port, "/endless");
      auto opened = co_await client->conn.request(big, true);
      if (!opened) co_return;
      ClientExchange ex = std::move(*opened);
      const auto e = co_await ex.read_response_head();
      if (e) co_return;
      std::vector<std::uint8_t> buf(1000);
      auto [ec, n] = co_await ex.read_body(buf);
      if (!ec) first_part.assign(reinterpret_cast<const char*>(buf.data()), n);
    }  // dropped here, mid-body
    const RequestHead small = get(port, "/head");
    auto opened = co_await client->conn.request(small, true);
    if (!opened) co_return;
    ClientExchange ex = std::move(*opened);
    const auto e = co_await ex.read_response_head();
    if (!e) status = ex.response().status;
    co_await client->finish();
  }));
  EXPECT_FALSE(first_part.empty());
  EXPECT_EQ(status, 200);
  EXPECT_EQ(endless_cut - cut_before, 1);  // the server saw the reset, not its own cap
}

// A handler that returns without answering has its stream reset; the connection goes on.
TEST(H2BackToBack, HandlerWithoutResponseResetsItsStreamOnly) {
  LoopbackServer server([](ServerExchange& ex) -> asio::awaitable<void> {
    if (ex.request().path == "/forget") co_return;
    co_await standard_handler(ex);
  });
  const std::uint16_t port = server.port();
  boost::system::error_code forgotten;
  std::uint32_t code = 0;
  int status = 0;
  ASSERT_TRUE(run_client([&]() -> asio::awaitable<void> {
    auto client = co_await TestClient::connect(port);
    const RequestHead lost = get(port, "/forget");
    auto ex_r = co_await client->conn.request(lost, true);
    if (!ex_r) co_return;
    ClientExchange ex = std::move(*ex_r);
    forgotten = co_await ex.read_response_head();
    code = ex.reset_code();
    const RequestHead fine = get(port, "/head");
    auto ex2_r = co_await client->conn.request(fine, true);
    if (!ex2_r) co_return;
    ClientExchange ex2 = std::move(*ex2_r);
    const auto r13 = co_await ex2.read_response_head();
    if (!r13) status = ex2.response().status;
    co_await client->finish();
  }));
  EXPECT_EQ(forgotten, make_error_code(Error::stream_reset));
  EXPECT_EQ(code, static_cast<std::uint32_t>(ResetCode::internal_error));
  EXPECT_EQ(status, 200);
}

}  // namespace
}  // namespace sandgate::h2::test
