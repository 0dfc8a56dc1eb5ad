// ServerConnection against real HTTP/2 clients on loopback (h2c, prior knowledge): nghttp
// (Debian's nghttp2-client) and python3-h2 / raw frames (peers/h2_client.py), including the
// floods of THREATS 21: rapid reset (CVE-2023-44487) and CONTINUATION (CVE-2024-28182).
#include <gtest/gtest.h>

#include <fstream>

#include "h2_fixture.hpp"
#include "support/subprocess.hpp"
#include "support/temp_dir.hpp"

namespace sandgate::h2::test {
namespace {

using sandgate::test::run_command;

std::string port_of(const LoopbackServer& s) {
  return std::to_string(s.port());
}

// Counts occurrences of `needle` in `hay`.
int count(const std::string& hay, const std::string& needle) {
  int n = 0;
  for (auto at = hay.find(needle); at != std::string::npos; at = hay.find(needle, at + 1)) ++n;
  return n;
}

TEST(H2ServerPeers, NghttpManyConcurrentStreams) {
  LoopbackServer server(standard_handler);
  std::vector<std::string> argv{"nghttp", "-nv", "-m", "40"};
  argv.push_back(server.url("/bytes/100000"));
  argv.push_back(server.url("/head"));
  const auto r = run_command(argv);
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out.substr(0, 2000);
  EXPECT_EQ(count(r.out, ":status: 200"), 80);
  // Every stream ended (nghttp exits non-zero on a reset or a short body).
  EXPECT_EQ(server.handler_exceptions.load(), 0);
}

TEST(H2ServerPeers, NghttpUploadsALargeBody) {
  LoopbackServer server(standard_handler);
  sandgate::test::TempDir dir;
  const std::string file = dir.write("upload.bin", pattern(3 << 20));
  const auto r = run_command({"nghttp", "-d", file, server.url("/size")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, std::to_string(3 << 20));
}

TEST(H2ServerPeers, PythonTrailersBothWays) {
  LoopbackServer server(standard_handler);
  auto kv = run_peer(h2_client({"trailers", port_of(server)}));
  ASSERT_EQ(kv["exit"], "0") << kv["stderr"];
  EXPECT_EQ(kv["status"], "200");
  EXPECT_EQ(kv["body"], "msg0;msg1;msg2;msg3;msg4;");
  EXPECT_EQ(kv["trailer_x_sum"], "42");
  EXPECT_EQ(kv["trailer_grpc_status"], "0");
}

// Rows: what the request carries, and how the server must refuse it.
struct Refusal {
  const char* name;
  std::vector<std::string> args;  // after "get PORT PATH" (or the whole command for CONNECT)
  const char* status;             // answered with this status, or "none"
  const char* reset;              // or reset with this code, or "none"
};

class H2ServerRefuses : public testing::TestWithParam<Refusal> {};

TEST_P(H2ServerRefuses, Request) {
  LoopbackServer server(standard_handler);
  const Refusal& row = GetParam();
  std::vector<std::string> args;
  if (row.args.front() == "connect") {
    args = {"connect", port_of(server)};
  } else {
    args = {"get", port_of(server), "/head"};
    for (std::string arg : row.args) {  // "AUTHORITY": the one the client sends
      if (const auto at = arg.find("AUTHORITY"); at != std::string::npos) {
        arg.replace(at, 9, "127.0.0.1:" + port_of(server));
      }
      args.push_back(std::move(arg));
    }
  }
  auto kv = run_peer(h2_client(args));
  ASSERT_EQ(kv["exit"], "0") << kv["stderr"];
  EXPECT_EQ(kv["status"], row.status);
  EXPECT_EQ(kv["reset"], row.reset);
  EXPECT_EQ(kv["goaway"], "none");  // a stream's fault, not the connection's
  // The codec's own answers are reported to the owner.
  const std::string status = row.status;
  EXPECT_EQ(server.refused_405.load(), status == "405" ? 1 : 0);
  EXPECT_EQ(server.refused_400.load(), status == "400" ? 1 : 0);
}

// HTTP/2 error codes: 1 PROTOCOL_ERROR.
INSTANTIATE_TEST_SUITE_P(
    Rows, H2ServerRefuses,
    testing::Values(
        Refusal{"plain", {"x-fine=yes"}, "200", "none"},
        Refusal{"host_differs_from_authority", {"host=127.0.0.1:1"}, "400", "none"},
        // One host, matching, wherever it stands among the fields (it was taken for a second).
        Refusal{"host_after_other_fields", {"x-fine=yes", "host=AUTHORITY"}, "200", "none"},
        Refusal{"host_twice", {"host=127.0.0.1:1", "host=127.0.0.1:1"}, "none", "1"},  // nghttp2
        // CONNECT is answered, then the stream is ended (RST_STREAM NO_ERROR): its request
        // side was still open.
        Refusal{"connect", {"connect"}, "405", "0"},
        Refusal{"connection_field", {"connection=keep-alive"}, "none", "1"},
        Refusal{"transfer_encoding", {"transfer-encoding=chunked"}, "none", "1"},
        Refusal{"upgrade_h2c", {"upgrade=h2c"}, "none", "1"},
        Refusal{"te_gzip", {"te=gzip"}, "none", "1"},
        Refusal{"te_trailers", {"te=trailers"}, "200", "none"},
        Refusal{"uppercase_name", {"X-Upper=1"}, "none", "1"}),
    [](const testing::TestParamInfo<Refusal>& i) { return std::string(i.param.name); });

TEST(H2ServerPeers, OversizeHeaderBlockIs431AndTheConnectionGoesOn) {
  LoopbackServer server(standard_handler);
  auto kv = run_peer(h2_client({"big-header", port_of(server), "80000"}));
  ASSERT_EQ(kv["exit"], "0") << kv["stderr"];
  EXPECT_EQ(kv["status"], "431");
  EXPECT_EQ(kv["after_status"], "200");
  EXPECT_EQ(server.refused_431.load(), 1);
  EXPECT_EQ(kv["goaway"], "none");
}

TEST(H2ServerPeers, HeaderBlockUnderTheLimitIsServed) {
  LoopbackServer server(standard_handler);
  auto kv = run_peer(h2_client({"big-header", port_of(server), "40000"}));
  ASSERT_EQ(kv["exit"], "0") << kv["stderr"];
  EXPECT_EQ(kv["status"], "200");
}

// The handler never reads: the client may send one stream window and no more.
TEST(H2ServerPeers, UnreadUploadStallsThePythonClient) {
  Settings settings;
  LoopbackServer server(standard_handler, settings);
  auto kv = run_peer(h2_client({"slow-upload", port_of(server)}));
  ASSERT_EQ(kv["exit"], "0") << kv["stderr"];
  const long sent = std::stol(kv["sent"]);
  EXPECT_GT(sent, 0);
  EXPECT_LE(sent, settings.stream_window);
  EXPECT_EQ(kv["window_after"], "0");
}

// CVE-2023-44487: streams opened and reset at once, over and over. The server ends the
// connection with GOAWAY (ENHANCE_YOUR_CALM from our bucket, or INTERNAL_ERROR from nghttp2's
// RST_STREAM limiter) and serves the next connection.
TEST(H2ServerPeers, RapidResetFloodEndsTheConnection) {
  LoopbackServer server(standard_handler);
  auto kv = run_peer(h2_client({"rapid-reset", port_of(server), "3000"}));
  ASSERT_EQ(kv["exit"], "0") << kv["stderr"];
  EXPECT_TRUE(kv["goaway"] == "11" || kv["goaway"] == "2") << "goaway=" << kv["goaway"];
  EXPECT_LT(std::stoi(kv["sent"]), 3000);  // cut off before the client was done
  EXPECT_EQ(kv["closed"], "True");
  auto next = run_peer(h2_client({"get", port_of(server), "/head"}));
  EXPECT_EQ(next["status"], "200");
}

// What rapid reset costs the server per stream: a stream reset in the same read as its head
// never starts a handler (in the proxy: no decision, no upstream dial). Only a pair split by
// a read boundary may start one.
TEST(H2ServerPeers, RapidResetStartsNoHandlers) {
  std::atomic<int> started{0};
  LoopbackServer server([&started](ServerExchange& ex) -> asio::awaitable<void> {
    ++started;
    co_await standard_handler(ex);
  });
  auto kv = run_peer(h2_client({"rapid-reset", port_of(server), "3000"}));
  ASSERT_EQ(kv["exit"], "0") << kv["stderr"];
  EXPECT_NE(kv["goaway"], "none");
  EXPECT_LT(started.load(), 20) << "of " << Settings{}.reset_burst << " streams before the GOAWAY";
}

// A client that resets a few streams is not a flood.
TEST(H2ServerPeers, AFewResetsAreFine) {
  LoopbackServer server(standard_handler);
  auto kv = run_peer(h2_client({"rapid-reset", port_of(server), "100", "1"}));
  ASSERT_EQ(kv["exit"], "0") << kv["stderr"];
  EXPECT_EQ(kv["goaway"], "none");
}

// CVE-2024-28182: a header block that never ends, one CONTINUATION frame after another.
TEST(H2ServerPeers, ContinuationFloodEndsTheConnection) {
  LoopbackServer server(standard_handler);
  auto kv = run_peer(h2_client({"continuation", port_of(server), "10000"}));
  ASSERT_EQ(kv["exit"], "0") << kv["stderr"];
  EXPECT_EQ(kv["closed"], "True");
  EXPECT_NE(kv["goaway"], "none");
  auto next = run_peer(h2_client({"get", port_of(server), "/head"}));
  EXPECT_EQ(next["status"], "200");
}

// PINGs whose ACKs the client never reads: nghttp2 stops at max_outbound_ack queued ACKs and
// the connection ends; the server goes on serving.
TEST(H2ServerPeers, PingFloodEndsTheConnection) {
  LoopbackServer server(standard_handler);
  auto kv = run_peer(h2_client({"ping-flood", port_of(server), "3000000"}));
  ASSERT_EQ(kv["exit"], "0") << kv["stderr"];
  EXPECT_EQ(kv["closed"], "True") << "sent=" << kv["sent"] << " goaway=" << kv["goaway"];
  auto next = run_peer(h2_client({"get", port_of(server), "/head"}));
  EXPECT_EQ(next["status"], "200");
}

// Zero-length DATA frames without END_STREAM carry nothing and cost a frame each
// (CVE-2019-9518): more than max_empty_frames in a row end the connection.
TEST(H2ServerPeers, EmptyDataFloodEndsTheConnection) {
  LoopbackServer server(standard_handler);
  // Few enough that the server has read them all when it closes (a reset would drop the
  // GOAWAY: this server does not linger), many more than the limit.
  auto kv = run_peer(h2_client({"empty-data", port_of(server), "1000", "/hold-body"}));
  ASSERT_EQ(kv["exit"], "0") << kv["stderr"];
  EXPECT_EQ(kv["goaway"], "11");  // ENHANCE_YOUR_CALM
  EXPECT_EQ(kv["closed"], "True");
  EXPECT_EQ(server.calmed.load(), 1);
  auto next = run_peer(h2_client({"get", port_of(server), "/head"}));
  EXPECT_EQ(next["status"], "200");
}

// Up to max_empty_frames of them are fine.
TEST(H2ServerPeers, AFewEmptyDataFramesAreFine) {
  Settings settings;
  LoopbackServer server(standard_handler, settings);
  auto kv = run_peer(h2_client({"empty-data", port_of(server),
                                std::to_string(settings.max_empty_frames), "/hold-body", "1"}));
  ASSERT_EQ(kv["exit"], "0") << kv["stderr"];
  EXPECT_EQ(kv["goaway"], "none");
  EXPECT_EQ(kv["closed"], "False");
}

// More SETTINGS entries in one frame than max_settings_entries (32): a connection error.
TEST(H2ServerPeers, SettingsWithTooManyEntriesEndsTheConnection) {
  LoopbackServer server(standard_handler);
  auto kv = run_peer(h2_client({"settings-entries", port_of(server), "64"}));
  ASSERT_EQ(kv["exit"], "0") << kv["stderr"];
  EXPECT_EQ(kv["closed"], "True");
  EXPECT_EQ(kv["goaway"], "11");  // ENHANCE_YOUR_CALM
  auto fine = run_peer(h2_client({"settings-entries", port_of(server), "8", "1"}));
  EXPECT_EQ(fine["closed"], "False");
}

}  // namespace
}  // namespace sandgate::h2::test
