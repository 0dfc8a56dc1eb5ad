// ClientConnection against real HTTP/2 servers on loopback (h2c, prior knowledge): nghttpd
// (Debian's nghttp2-server) and a python3-h2 server (peers/h2_server.py).
#include <gtest/gtest.h>

#include "h2_fixture.hpp"
#include "support/temp_dir.hpp"

namespace sandgate::h2::test {
namespace {

RequestHead get(std::uint16_t port, std::string path) {
  return RequestHead{"GET", "http", "127.0.0.1:" + std::to_string(port), std::move(path), {}};
}

// What one GET ended with.
struct Got {
  boost::system::error_code ec;
  int status = 0;
  std::string body;
  Fields trailers;
};

asio::awaitable<Got> fetch(ClientConnection<tcp::socket>& conn, RequestHead head) {
  Got got;
  auto opened = co_await conn.request(head, true);
  if (!opened) {
    got.ec = opened.error();
    co_return got;
  }
  ClientExchange ex = std::move(*opened);
  got.ec = co_await ex.read_response_head();
  if (got.ec) co_return got;
  got.status = ex.response().status;
  got.ec = co_await read_all(ex, got.body);
  got.trailers = ex.trailers();
  co_return got;
}

// Runs fetch() for each head at once on one connection.
asio::awaitable<std::vector<Got>> fetch_all(TestClient& client, std::vector<RequestHead> heads) {
  auto ex = co_await asio::this_coro::executor;
  std::vector<Got> results(heads.size());
  std::size_t finished = 0;
  detail::Signal all(ex);
  // The closure outlives every coroutine made from it (a coroutine lambda's frame refers to
  // its closure, so it must not be a temporary of the loop).
  auto one = [&](std::size_t i) -> asio::awaitable<void> {
    results[i] = co_await fetch(client.conn, heads[i]);
  };
  for (std::size_t i = 0; i < heads.size(); ++i) {
    asio::co_spawn(ex, one(i), [&](std::exception_ptr) {
      ++finished;
      all.notify();
    });
  }
  while (finished < heads.size()) co_await all.wait();
  co_return results;
}

TEST(H2ClientPeers, NghttpdServesConcurrentDownloads) {
  sandgate::test::TempDir dir;
  constexpr std::size_t kBig = 2 << 20;
  dir.write("big.bin", pattern(kBig));
  dir.write("small.txt", "small file\n");
  const PeerOnPort nghttpd = start_on_free_port([&](std::uint16_t p) {
    return std::vector<std::string>{"nghttpd", "--no-tls", "-d", dir.path().string(),
                                    std::to_string(p)};
  });
  ASSERT_TRUE(nghttpd.peer);
  const std::uint16_t port = nghttpd.port;
  Settings settings;
  settings.stream_window = 64 * 1024;  // many window updates on the way
  std::vector<Got> got;
  ASSERT_TRUE(run_client([&]() -> asio::awaitable<void> {
    auto client = co_await TestClient::connect(port, settings);
    std::vector<RequestHead> heads;
    for (int i = 0; i < 10; ++i) {
      heads.push_back(get(port, "/big.bin"));
      heads.push_back(get(port, "/small.txt"));
    }
    got = co_await fetch_all(*client, heads);
    co_await client->finish();
  }));
  ASSERT_EQ(got.size(), 20u);
  const std::string big = pattern(kBig);
  for (std::size_t i = 0; i < got.size(); ++i) {
    EXPECT_FALSE(got[i].ec) << i << ": " << got[i].ec.message();
    EXPECT_EQ(got[i].status, 200) << i;
    if (i % 2 == 0) {
      EXPECT_EQ(got[i].body.size(), kBig) << i;
      EXPECT_TRUE(got[i].body == big) << i;
    } else {
      EXPECT_EQ(got[i].body, "small file\n") << i;
    }
  }
}

TEST(H2ClientPeers, NghttpdNotFoundIsAResponse) {
  sandgate::test::TempDir dir;
  const PeerOnPort nghttpd = start_on_free_port([&](std::uint16_t p) {
    return std::vector<std::string>{"nghttpd", "--no-tls", "-d", dir.path().string(),
                                    std::to_string(p)};
  });
  ASSERT_TRUE(nghttpd.peer);
  const std::uint16_t port = nghttpd.port;
  Got got;
  ASSERT_TRUE(run_client([&]() -> asio::awaitable<void> {
    auto client = co_await TestClient::connect(port);
    got = co_await fetch(client->conn, get(port, "/missing"));
    co_await client->finish();
  }));
  EXPECT_FALSE(got.ec);
  EXPECT_EQ(got.status, 404);
}

// The server's GOAWAY names stream 3 as the last it processes: streams 1 and 3 finish, 5 is
// refused (safe to retry elsewhere), and a new request fails with goaway.
TEST(H2ClientPeers, PythonServerGoawayLastStreamId) {
  BackgroundPeer server({"/usr/bin/python3", SANDGATE_H2_PEERS_DIR "/h2_server.py"});
  const std::string port_text = server.ready_line("port=");
  ASSERT_FALSE(port_text.empty());
  const auto port = static_cast<std::uint16_t>(std::stoi(port_text));
  std::vector<Got> got;
  boost::system::error_code late;
  bool run_ended = false;
  ASSERT_TRUE(run_client([&]() -> asio::awaitable<void> {
    auto client = co_await TestClient::connect(port);
    const std::vector<RequestHead> heads(3, get(port, "/goaway/3"));
    got = co_await fetch_all(*client, heads);
    auto again = co_await client->conn.request(heads[0], true);
    if (!again) late = again.error();
    while (!client->done) co_await client->ended->wait();  // ends by itself after GOAWAY
    run_ended = true;
  }));
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0].status, 200);
  EXPECT_EQ(got[0].body, "ok-1");
  EXPECT_EQ(got[1].status, 200);
  EXPECT_EQ(got[1].body, "ok-3");
  EXPECT_EQ(got[2].ec, make_error_code(Error::refused));
  EXPECT_EQ(late, make_error_code(Error::goaway));
  EXPECT_TRUE(run_ended);
}

// 103 Early Hints is skipped; the final response's trailers are kept.
TEST(H2ClientPeers, PythonServerInterimResponseAndTrailers) {
  BackgroundPeer server({"/usr/bin/python3", SANDGATE_H2_PEERS_DIR "/h2_server.py"});
  const std::string port_text = server.ready_line("port=");
  ASSERT_FALSE(port_text.empty());
  const auto port = static_cast<std::uint16_t>(std::stoi(port_text));
  Got got;
  ASSERT_TRUE(run_client([&]() -> asio::awaitable<void> {
    auto client = co_await TestClient::connect(port);
    got = co_await fetch(client->conn, get(port, "/interim"));
    co_await client->finish();
  }));
  EXPECT_FALSE(got.ec) << got.ec.message();
  EXPECT_EQ(got.status, 200);
  EXPECT_EQ(got.body, "final");
  const Fields expected{{"grpc-status", "0"}};
  EXPECT_EQ(got.trailers, expected);
}

// A response head over max_header_list_bytes resets its stream; the connection goes on.
TEST(H2ClientPeers, PythonServerOversizeResponseHead) {
  BackgroundPeer server({"/usr/bin/python3", SANDGATE_H2_PEERS_DIR "/h2_server.py"});
  const std::string port_text = server.ready_line("port=");
  ASSERT_FALSE(port_text.empty());
  const auto port = static_cast<std::uint16_t>(std::stoi(port_text));
  Got big;
  Got after;
  ASSERT_TRUE(run_client([&]() -> asio::awaitable<void> {
    auto client = co_await TestClient::connect(port);
    big = co_await fetch(client->conn, get(port, "/big-head"));
    after = co_await fetch(client->conn, get(port, "/small"));
    co_await client->finish();
  }));
  EXPECT_EQ(big.ec, make_error_code(Error::header_too_large));
  EXPECT_FALSE(after.ec) << after.ec.message();
  EXPECT_EQ(after.body, "/small");
}

}  // namespace
}  // namespace sandgate::h2::test
