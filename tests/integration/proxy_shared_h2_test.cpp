// Intercepted HTTP/2 to an HTTP/2 origin: the upstream connections are shared by the client
// connections of one sandbox to one origin (proxy/upstreams/shared_h2.hpp), never between
// sandboxes or across a reload, up to the origin's stream limit. The origin (python3-h2,
// tests/unit/h2/peers/shared_origin.py) numbers its connections and answers with the number.

#include <gtest/gtest.h>

#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "support/eventually.hpp"
#include "support/metrics_text.hpp"
#include "support/sandgate_process.hpp"
#include "support/subprocess.hpp"
#include "support/temp_dir.hpp"
#include "support/tls_origin.hpp"
#include "unit/h2/h2_fixture.hpp"

namespace sandgate::test {
namespace {

const std::string kPeers = SANDGATE_H2_PEERS_DIR;
const std::string kSb1 = "sb1:tok-sb1-shared-h2-Zq";
const std::string kSb2 = "sb2:tok-sb2-shared-h2-Wm";

class ProxySharedH2 : public ::testing::Test {
 protected:
  // The origin, with `max_streams` as its SETTINGS_MAX_CONCURRENT_STREAMS, and the daemon.
  void start(int max_streams = 100) {
    origin_ = std::make_unique<h2::test::BackgroundPeer>(
        std::vector<std::string>{"/usr/bin/python3", kPeers + "/shared_origin.py", origin_cert_,
                                 origin_key_, stats_, std::to_string(max_streams)});
    port_ = origin_->ready_line("port=");
    ASSERT_FALSE(port_.empty()) << "the python3-h2 origin did not start";
    daemon_ = std::make_unique<SandgateProcess>(SandgateOptions{tables()});
  }

  std::string tables(const std::string& keepalive_ms = "10000") const {
    std::string sandboxes;
    for (const std::string& auth : {kSb1, kSb2}) {
      const auto colon = auth.find(':');
      sandboxes += "[sandboxes." + auth.substr(0, colon) + "]\ntoken = \"" +
                   auth.substr(colon + 1) + "\"\nports = [" + port_ +
                   "]\nallow = [\"api.test\"]\ninspect = [\"api.test\"]\n"
                   "allow_cidrs = [\"127.0.0.1/32\"]\n";
    }
    return "[limits]\nidle_timeout_ms = 3000\nupstream_keepalive_ms = " + keepalive_ms +
           "\n\n[dns.hosts]\n\"api.test\" = [\"127.0.0.1\"]\n\n[interception]\nca_cert = \"" +
           ca_dir_.file("ca/ca.pem") + "\"\nca_key = \"" + ca_dir_.file("ca/ca.key") +
           "\"\nupstream_ca_file = \"" + origin_cert_ + "\"\n\n" + sandboxes;
  }

  // proxy_clients.py with one CONN per argument; its sorted "I PATH STATUS BODY" lines.
  std::vector<std::string> clients(const std::vector<std::string>& conns) const {
    std::vector<std::string> argv = {"/usr/bin/python3", kPeers + "/proxy_clients.py",
                                     std::to_string(daemon_->explicit_port()),
                                     ca_dir_.file("ca/ca.pem"), "api.test:" + port_};
    argv.insert(argv.end(), conns.begin(), conns.end());
    const auto r = run_command(argv);
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    std::vector<std::string> lines;
    std::istringstream in(r.out);
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    return lines;
  }

  // "conns=C resets=R" as the origin last wrote it.
  std::string stats() const {
    std::ifstream in(stats_);
    std::string line;
    std::getline(in, line);
    return line;
  }
  double kept_idle() const {
    return metric_value(daemon_->metrics_text(), "sandgate_upstream_pool_connections").value_or(-1);
  }

  TempDir ca_dir_;
  const bool ca_made_ =
      run_command({sandgate_binary(), "ca", "init", ca_dir_.file("ca")}).exit_code == 0;
  const TestCertificate cert_ = make_self_signed_certificate({"api.test"}, {});
  const std::string origin_cert_ = ca_dir_.write("origin.pem", cert_.cert_pem);
  const std::string origin_key_ = ca_dir_.write("origin.key", cert_.key_pem);
  const std::string stats_ = ca_dir_.file("origin.stats");
  std::unique_ptr<h2::test::BackgroundPeer> origin_;
  std::string port_;
  std::unique_ptr<SandgateProcess> daemon_;
};

// Two client connections of one sandbox, open at once: one upstream connection serves both
// (one TLS set-up at the origin). Another sandbox's client gets a connection of its own. A
// later client connection of the first sandbox reuses the one kept idle meanwhile.
TEST_F(ProxySharedH2, ClientConnectionsOfOneSandboxShareOneUpstreamConnection) {
  ASSERT_TRUE(ca_made_);
  start();
  EXPECT_EQ(
      clients({kSb1 + "=/conn,/conn", kSb1 + "=/conn"}),
      (std::vector<std::string>{"0 /conn 200 conn=1", "0 /conn 200 conn=1", "1 /conn 200 conn=1"}));
  EXPECT_EQ(stats(), "conns=1 resets=0");
  // Never between sandboxes: sb2's streams get a connection of their own.
  EXPECT_EQ(clients({kSb2 + "=/conn", kSb2 + "=/conn"}),
            (std::vector<std::string>{"0 /conn 200 conn=2", "1 /conn 200 conn=2"}));
  // Both kept idle once their client connections ended; the next client reuses sb1's.
  ASSERT_TRUE(daemon_->wait_no_connections());
  EXPECT_TRUE(eventually([&] { return kept_idle() == 2; })) << kept_idle();
  EXPECT_EQ(clients({kSb1 + "=/conn"}), std::vector<std::string>{"0 /conn 200 conn=1"});
  EXPECT_EQ(stats(), "conns=2 resets=0");
}

// At the origin's stream limit (1 here) a client connection's second stream waits for the
// first rather than opening a connection of its own: one sandbox never holds more upstream
// connections than client connections (THREATS 31). Two client connections get two.
TEST_F(ProxySharedH2, AtTheOriginsStreamLimitEachClientConnectionMayAddOne) {
  ASSERT_TRUE(ca_made_);
  start(1);
  EXPECT_EQ(clients({kSb1 + "=/slow?ms=300,/slow?ms=300,/conn"}),
            (std::vector<std::string>{"0 /conn 200 conn=1", "0 /slow?ms=300 200 conn=1",
                                      "0 /slow?ms=300 200 conn=1"}));
  EXPECT_EQ(stats(), "conns=1 resets=0");
  const auto two = clients({kSb1 + "=/slow?ms=500", kSb1 + "=/slow?ms=500"});
  ASSERT_EQ(two.size(), 2u);
  EXPECT_NE(two[0].substr(2), two[1].substr(2)) << two[0] << " / " << two[1];
  EXPECT_EQ(stats(), "conns=2 resets=0");
  // Both client connections gone: one upstream connection is kept, the other closed.
  ASSERT_TRUE(daemon_->wait_no_connections());
  EXPECT_TRUE(eventually([&] { return kept_idle() == 1; })) << kept_idle();
}

// A client connection that goes away resets its own streams on the shared connection (the
// origin sees the reset) and nothing else: another client connection's stream on it is
// answered, and the connection goes on serving.
TEST_F(ProxySharedH2, AClientConnectionsEndResetsOnlyItsOwnStreams) {
  ASSERT_TRUE(ca_made_);
  start();
  EXPECT_EQ(clients({kSb1 + "=/silent@300", kSb1 + "=/slow?ms=1000"}),
            (std::vector<std::string>{"0 /silent - -", "1 /slow?ms=1000 200 conn=1"}));
  EXPECT_TRUE(eventually([&] { return stats() == "conns=1 resets=1"; })) << stats();
  EXPECT_EQ(clients({kSb1 + "=/conn"}), std::vector<std::string>{"0 /conn 200 conn=1"});
}

// A connection the origin sent GOAWAY on takes no new stream: the next goes over a new one.
TEST_F(ProxySharedH2, AfterTheOriginsGoawayStreamsGoOverANewConnection) {
  ASSERT_TRUE(ca_made_);
  start();
  EXPECT_EQ(clients({kSb1 + "=/goaway"}), std::vector<std::string>{"0 /goaway 200 conn=1"});
  EXPECT_EQ(clients({kSb1 + "=/conn,/conn"}),
            (std::vector<std::string>{"0 /conn 200 conn=2", "0 /conn 200 conn=2"}));
  EXPECT_EQ(stats(), "conns=2 resets=0");
}

// A shared connection that breaks fails every stream on it, whichever client connection's
// (each is answered 502, as over a connection of its own); the next request dials anew. The
// break comes 300 ms after the streams were sent, so that all three are on the connection.
TEST_F(ProxySharedH2, ABrokenSharedConnectionFailsItsStreamsAndIsReplaced) {
  ASSERT_TRUE(ca_made_);
  start();
  const auto broken = clients({kSb1 + "=/slow?ms=1500", kSb1 + "=/silent,/drop?ms=300"});
  ASSERT_EQ(broken.size(), 3u) << ::testing::PrintToString(broken);
  for (const std::string& line : broken) {
    EXPECT_EQ(line.substr(line.find(' ', 2) + 1, 4), "502 ") << line;
    EXPECT_NE(line.find("UPSTREAM_CONNECT_FAILED"), std::string::npos) << line;
  }
  EXPECT_EQ(clients({kSb1 + "=/conn"}), std::vector<std::string>{"0 /conn 200 conn=2"});
}

// A reload starts afresh: the connection kept under the old config is not used under the new
// one. Without keep-alive nothing is kept, and the daemon stops at once either way.
TEST_F(ProxySharedH2, AReloadOrNoKeepAliveStartsAfresh) {
  ASSERT_TRUE(ca_made_);
  start();
  EXPECT_EQ(clients({kSb1 + "=/conn"}), std::vector<std::string>{"0 /conn 200 conn=1"});
  ASSERT_TRUE(daemon_->reload(tables("0")));
  EXPECT_EQ(clients({kSb1 + "=/conn"}), std::vector<std::string>{"0 /conn 200 conn=2"});
  ASSERT_TRUE(daemon_->wait_no_connections());
  EXPECT_EQ(clients({kSb1 + "=/conn"}), std::vector<std::string>{"0 /conn 200 conn=3"});
  ASSERT_TRUE(daemon_->reload(tables()));
  EXPECT_EQ(clients({kSb1 + "=/conn"}), std::vector<std::string>{"0 /conn 200 conn=4"});
  ASSERT_TRUE(daemon_->wait_no_connections());
  EXPECT_TRUE(eventually([&] { return kept_idle() == 1; })) << kept_idle();
  const auto stopping = std::chrono::steady_clock::now();
  EXPECT_EQ(daemon_->stop(), 0);
  EXPECT_LT(std::chrono::steady_clock::now() - stopping, std::chrono::seconds(2));
}

}  // namespace
}  // namespace sandgate::test
