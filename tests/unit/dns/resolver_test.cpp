#include "dns/resolver.hpp"

#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <memory>
#include <optional>
#include <stdexcept>
#include <thread>
#include <variant>

#include "support/fake_dns_server.hpp"

namespace sandgate::dns {
namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;
using policy::IpAddress;
using test::FakeDnsServer;
using Reply = FakeDnsServer::Reply;

IpAddress ip(const std::string& text) {
  std::array<std::uint8_t, 16> bytes{};
  if (inet_pton(AF_INET, text.c_str(), bytes.data()) == 1) {
    return IpAddress::v4(static_cast<std::uint32_t>(bytes[0]) << 24 |
                         static_cast<std::uint32_t>(bytes[1]) << 16 |
                         static_cast<std::uint32_t>(bytes[2]) << 8 | bytes[3]);
  }
  if (inet_pton(AF_INET6, text.c_str(), bytes.data()) == 1) return IpAddress::v6(bytes);
  throw std::invalid_argument(text);
}

std::vector<IpAddress> ips(std::initializer_list<const char*> texts) {
  std::vector<IpAddress> out;
  for (const char* t : texts) out.push_back(ip(t));
  return out;
}

// Cache time, moved by hand; deadlines still run on the real clock.
struct ManualClock {
  std::chrono::steady_clock::time_point now = std::chrono::steady_clock::now();
};

class ResolverTest : public ::testing::Test {
 protected:
  ResolverOptions options() {
    ResolverOptions opts;
    opts.servers = {server_.address()};
    opts.timeout = 2s;
    opts.now = [clock = clock_] { return clock->now; };
    return opts;
  }

  std::unique_ptr<Resolver> make(ResolverOptions opts) {
    return std::make_unique<Resolver>(io_.get_executor(), std::move(opts));
  }

  // Runs the io_context until `done` holds, for at most 5 s.
  template <class Pred>
  void run_until(Pred done) {
    const auto give_up = std::chrono::steady_clock::now() + 5s;
    while (!done() && std::chrono::steady_clock::now() < give_up) {
      if (io_.stopped()) io_.restart();
      io_.run_one_for(10ms);
    }
  }

  // Starts a lookup; the result lands in the returned slot once the io_context runs.
  std::shared_ptr<std::optional<Result<Answer>>> spawn(Resolver& resolver, std::string name) {
    auto slot = std::make_shared<std::optional<Result<Answer>>>();
    asio::co_spawn(io_, resolver.resolve(std::move(name)),
                   [slot](const std::exception_ptr& e, Result<Answer> r) {
                     if (e) std::rethrow_exception(e);
                     *slot = std::move(r);
                   });
    return slot;
  }

  // lookup(): negative answers as values.
  Result<Answer> lookup(Resolver& resolver, std::string name) {
    auto slot = std::make_shared<std::optional<Result<Answer>>>();
    asio::co_spawn(io_, resolver.lookup(std::move(name)),
                   [slot](const std::exception_ptr& e, Result<Answer> r) {
                     if (e) std::rethrow_exception(e);
                     *slot = std::move(r);
                   });
    run_until([&] { return slot->has_value(); });
    if (!slot->has_value()) throw std::runtime_error("lookup never finished");
    return **slot;
  }

  Result<Answer> resolve(Resolver& resolver, std::string name) {
    const auto slot = spawn(resolver, std::move(name));
    run_until([&] { return slot->has_value(); });
    if (!slot->has_value()) throw std::runtime_error("lookup never finished");
    return **slot;
  }

  asio::io_context io_;
  FakeDnsServer server_;
  std::shared_ptr<ManualClock> clock_ = std::make_shared<ManualClock>();
};

TEST_F(ResolverTest, AnswersFromRecords) {
  struct Row {
    const char* what;
    std::vector<std::pair<const char*, std::uint32_t>> records;  // address, ttl
    std::vector<IpAddress> want;
    std::chrono::seconds want_ttl;
  };
  const std::vector<Row> rows = {
      {"a only", {{"192.0.2.1", 60}}, ips({"192.0.2.1"}), 60s},
      {"aaaa only", {{"2001:db8::1", 120}}, ips({"2001:db8::1"}), 120s},
      {"ipv4 first, server order kept",
       {{"2001:db8::2", 60}, {"192.0.2.7", 60}, {"2001:db8::1", 60}, {"192.0.2.3", 60}},
       ips({"192.0.2.7", "192.0.2.3", "2001:db8::2", "2001:db8::1"}),
       60s},
      {"duplicates dropped",
       {{"192.0.2.1", 60}, {"192.0.2.1", 60}, {"2001:db8::1", 60}, {"2001:db8::1", 60}},
       ips({"192.0.2.1", "2001:db8::1"}),
       60s},
      {"ttl is the smallest",
       {{"192.0.2.1", 60}, {"192.0.2.2", 30}, {"2001:db8::1", 45}},
       ips({"192.0.2.1", "192.0.2.2", "2001:db8::1"}),
       30s},
      {"ttl capped by max_ttl", {{"192.0.2.1", 86400}}, ips({"192.0.2.1"}), 300s},
      {"zero ttl", {{"192.0.2.1", 0}}, ips({"192.0.2.1"}), 0s},
  };
  auto resolver = make(options());
  int i = 0;
  for (const Row& row : rows) {
    SCOPED_TRACE(row.what);
    const std::string name = "host" + std::to_string(i++) + ".test";
    for (const auto& [address, ttl] : row.records) server_.add_record(name, address, ttl);
    const Result<Answer> r = resolve(*resolver, name);
    ASSERT_TRUE(r.has_value()) << r.error().message();
    EXPECT_EQ(r->addresses, row.want);
    EXPECT_EQ(r->ttl, row.want_ttl);
    EXPECT_FALSE(r->from_cache);
    EXPECT_EQ(server_.queries(name, FakeDnsServer::kTypeA), 1u);
    EXPECT_EQ(server_.queries(name, FakeDnsServer::kTypeAaaa), 1u);
  }
}

TEST_F(ResolverTest, FailuresMapToErrorCodes) {
  struct Row {
    const char* what;
    std::optional<Reply> reply;  // nullopt: the name is unknown to the server
    bool records;                // give the name an A record first
    Errc want;
  };
  const std::vector<Row> rows = {
      {"nxdomain", std::nullopt, false, Errc::upstream_dns_failed},
      {"no addresses (nodata)", Reply::answer, false, Errc::upstream_dns_failed},
      {"servfail", Reply::servfail, true, Errc::upstream_dns_failed},
      {"refused", Reply::refused, true, Errc::upstream_dns_failed},
      {"malformed reply", Reply::malformed, true, Errc::upstream_dns_failed},
      {"garbage reply is ignored", Reply::garbage, true, Errc::upstream_timeout},
      {"never answers", Reply::drop, true, Errc::upstream_timeout},
  };
  auto opts = options();
  opts.timeout = 300ms;
  auto resolver = make(opts);
  int i = 0;
  for (const Row& row : rows) {
    SCOPED_TRACE(row.what);
    const std::string name = "fail" + std::to_string(i++) + ".test";
    if (row.records) server_.add_record(name, "192.0.2.1", 60);
    if (row.reply) server_.set_reply(name, *row.reply);
    const Result<Answer> r = resolve(*resolver, name);
    ASSERT_FALSE(r.has_value());
    EXPECT_EQ(r.error(), make_error_code(row.want)) << r.error().message();
  }
  EXPECT_EQ(resolver->stats().failures, rows.size());
}

TEST_F(ResolverTest, TimeoutEndsAtTheDeadline) {
  server_.add_record("slow.test", "192.0.2.1", 60);
  server_.set_reply("slow.test", Reply::drop);
  auto opts = options();
  opts.timeout = 300ms;
  auto resolver = make(opts);
  const auto start = std::chrono::steady_clock::now();
  const Result<Answer> r = resolve(*resolver, "slow.test");
  const auto took = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error(), make_error_code(Errc::upstream_timeout));
  EXPECT_GE(took, 290ms);
  EXPECT_LT(took, 800ms);
}

TEST_F(ResolverTest, OneFamilyIsAnAnswerButNotCached) {
  struct Row {
    const char* what;
    Reply aaaa;
  };
  const std::vector<Row> rows = {
      {"aaaa never answers", Reply::drop},
      {"aaaa servfail", Reply::servfail},
      {"aaaa malformed", Reply::malformed},
  };
  auto opts = options();
  opts.timeout = 300ms;
  auto resolver = make(opts);
  int i = 0;
  for (const Row& row : rows) {
    SCOPED_TRACE(row.what);
    const std::string name = "half" + std::to_string(i++) + ".test";
    server_.add_record(name, "192.0.2.1", 60);
    server_.set_reply(name, FakeDnsServer::kTypeAaaa, row.aaaa);
    const Result<Answer> r = resolve(*resolver, name);
    ASSERT_TRUE(r.has_value()) << r.error().message();
    EXPECT_EQ(r->addresses, ips({"192.0.2.1"}));

    // A half answer is not cached: the next lookup asks again and gets both families.
    server_.set_reply(name, FakeDnsServer::kTypeAaaa, Reply::answer);
    server_.add_record(name, "2001:db8::1", 60);
    const Result<Answer> again = resolve(*resolver, name);
    ASSERT_TRUE(again.has_value());
    EXPECT_FALSE(again->from_cache);
    EXPECT_EQ(again->addresses, ips({"192.0.2.1", "2001:db8::1"}));
  }
}

TEST_F(ResolverTest, CacheAnswersUntilTtlRunsOut) {
  server_.add_record("cached.test", "192.0.2.1", 10);
  auto resolver = make(options());
  ASSERT_TRUE(resolve(*resolver, "cached.test").has_value());

  clock_->now += 4s;
  const Result<Answer> hit = resolve(*resolver, "cached.test");
  ASSERT_TRUE(hit.has_value());
  EXPECT_TRUE(hit->from_cache);
  EXPECT_EQ(hit->ttl, 6s);
  EXPECT_EQ(hit->addresses, ips({"192.0.2.1"}));
  EXPECT_EQ(server_.queries("cached.test", FakeDnsServer::kTypeA), 1u);
  EXPECT_EQ(server_.queries("cached.test", FakeDnsServer::kTypeAaaa), 1u);

  clock_->now += 6s;
  const Result<Answer> miss = resolve(*resolver, "cached.test");
  ASSERT_TRUE(miss.has_value());
  EXPECT_FALSE(miss->from_cache);
  EXPECT_EQ(server_.queries("cached.test"), 4u);
  EXPECT_EQ(resolver->stats().cache_hits, 1u);
}

TEST_F(ResolverTest, ShortTtlExpiresOnTheRealClock) {
  server_.add_record("brief.test", "192.0.2.1", 1);
  auto opts = options();
  opts.now = nullptr;  // steady_clock
  auto resolver = make(opts);
  ASSERT_TRUE(resolve(*resolver, "brief.test").has_value());
  EXPECT_TRUE(resolve(*resolver, "brief.test")->from_cache);
  std::this_thread::sleep_for(1050ms);
  EXPECT_FALSE(resolve(*resolver, "brief.test")->from_cache);
  EXPECT_EQ(server_.queries("brief.test", FakeDnsServer::kTypeA), 2u);
}

TEST_F(ResolverTest, ZeroTtlIsNotCached) {
  server_.add_record("zero.test", "192.0.2.1", 0);
  auto resolver = make(options());
  ASSERT_TRUE(resolve(*resolver, "zero.test").has_value());
  ASSERT_TRUE(resolve(*resolver, "zero.test").has_value());
  EXPECT_EQ(server_.queries("zero.test", FakeDnsServer::kTypeA), 2u);
}

TEST_F(ResolverTest, NegativeAnswersCachedForNegativeTtl) {
  auto opts = options();
  opts.negative_ttl = 5s;
  auto resolver = make(opts);
  EXPECT_FALSE(resolve(*resolver, "missing.test").has_value());
  clock_->now += 4s;
  const Result<Answer> cached = resolve(*resolver, "missing.test");
  ASSERT_FALSE(cached.has_value());
  EXPECT_EQ(cached.error(), make_error_code(Errc::upstream_dns_failed));
  EXPECT_EQ(server_.queries("missing.test"), 2u);
  clock_->now += 1s;
  EXPECT_FALSE(resolve(*resolver, "missing.test").has_value());
  EXPECT_EQ(server_.queries("missing.test"), 4u);
}

// Issue 9 item 7: lookup() tells NXDOMAIN from NODATA and keeps the reply's SOA (its TTL
// min(record TTL, MINIMUM, negative_ttl), counting down in the cache); resolve() still fails.
TEST_F(ResolverTest, LookupReturnsNegativeAnswersWithTheirSoa) {
  server_.set_soa("zone.test", 300, 4);
  server_.set_reply("empty.zone.test", Reply::answer);  // exists, no records
  server_.add_record("v4.zone.test", "192.0.2.9", 60);  // AAAA: NODATA
  auto opts = options();
  opts.negative_ttl = 10s;
  auto resolver = make(opts);

  const Result<Answer> gone = lookup(*resolver, "gone.zone.test");
  ASSERT_TRUE(gone.has_value()) << gone.error().message();
  EXPECT_EQ(gone->negative, Answer::Negative::nxdomain);
  EXPECT_TRUE(gone->addresses.empty());
  EXPECT_EQ(gone->ttl, 4s);
  ASSERT_TRUE(gone->soa);
  EXPECT_EQ(gone->soa->zone, "zone.test");  // expanded from compression pointers
  EXPECT_EQ(gone->soa->mname, "ns1.zone.test");
  EXPECT_EQ(gone->soa->rname, "hostmaster.zone.test");
  EXPECT_EQ(gone->soa->serial, 2026120101u);
  EXPECT_EQ(gone->soa->minimum, 4u);
  EXPECT_EQ(gone->soa->ttl, 4u);
  EXPECT_EQ(resolve(*resolver, "gone.zone.test").error(),
            make_error_code(Errc::upstream_dns_failed));

  clock_->now += 1s;
  const Result<Answer> cached = lookup(*resolver, "gone.zone.test");
  ASSERT_TRUE(cached.has_value());
  EXPECT_TRUE(cached->from_cache);
  EXPECT_EQ(cached->negative, Answer::Negative::nxdomain);
  ASSERT_TRUE(cached->soa);
  EXPECT_EQ(cached->soa->ttl, 3u);
  EXPECT_EQ(server_.queries("gone.zone.test"), 2u);  // one A, one AAAA, then the cache

  const Result<Answer> empty = lookup(*resolver, "empty.zone.test");
  ASSERT_TRUE(empty.has_value());
  EXPECT_EQ(empty->negative, Answer::Negative::nodata);
  ASSERT_TRUE(empty->soa);
  EXPECT_EQ(empty->soa->zone, "zone.test");

  const Result<Answer> v4 = lookup(*resolver, "v4.zone.test");
  ASSERT_TRUE(v4.has_value());
  EXPECT_EQ(v4->negative, Answer::Negative::none);
  EXPECT_EQ(v4->addresses, ips({"192.0.2.9"}));
  ASSERT_TRUE(v4->soa);  // of the AAAA reply
  EXPECT_EQ(v4->soa->ttl, 4u);

  // Without an SOA in the reply: still NXDOMAIN, sandgate's own negative TTL, no SOA.
  const Result<Answer> bare = lookup(*resolver, "missing.test");
  ASSERT_TRUE(bare.has_value());
  EXPECT_EQ(bare->negative, Answer::Negative::nxdomain);
  EXPECT_FALSE(bare->soa);
  EXPECT_EQ(bare->ttl, 10s);
}

TEST_F(ResolverTest, ServerFailureIsNotCached) {
  server_.add_record("broken.test", "192.0.2.1", 60);
  server_.set_reply("broken.test", Reply::servfail);
  auto resolver = make(options());
  EXPECT_FALSE(resolve(*resolver, "broken.test").has_value());
  const std::size_t first = server_.queries("broken.test");
  EXPECT_GE(first, 2u);
  server_.set_reply("broken.test", Reply::answer);
  const Result<Answer> r = resolve(*resolver, "broken.test");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->addresses, ips({"192.0.2.1"}));
  EXPECT_GT(server_.queries("broken.test"), first);
}

TEST_F(ResolverTest, OldestEntryEvictedOverMaxEntries) {
  for (const char* name : {"a.test", "b.test", "c.test"}) server_.add_record(name, "192.0.2.1", 60);
  auto opts = options();
  opts.max_cache_entries = 2;
  auto resolver = make(opts);
  for (const char* name : {"a.test", "b.test", "c.test"}) {
    ASSERT_TRUE(resolve(*resolver, name).has_value());
  }
  EXPECT_TRUE(resolve(*resolver, "c.test")->from_cache);
  EXPECT_FALSE(resolve(*resolver, "a.test")->from_cache);
  EXPECT_EQ(server_.queries("a.test", FakeDnsServer::kTypeA), 2u);
}

TEST_F(ResolverTest, StaticHostsAndLiteralsSendNoQuery) {
  auto opts = options();
  opts.hosts["Static.Test."] = ips({"2001:db8::5", "192.0.2.5", "192.0.2.5"});
  opts.hosts["blocked.test"] = {};
  auto resolver = make(opts);
  EXPECT_EQ(resolve(*resolver, "blocked.test").error(), make_error_code(Errc::upstream_dns_failed));
  struct Row {
    const char* name;
    std::vector<IpAddress> want;
  };
  const std::vector<Row> rows = {
      {"static.test", ips({"192.0.2.5", "2001:db8::5"})},
      {"198.51.100.7", ips({"198.51.100.7"})},
      {"2001:db8::9", ips({"2001:db8::9"})},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.name);
    for (int round = 0; round < 2; ++round) {
      const Result<Answer> r = resolve(*resolver, row.name);
      ASSERT_TRUE(r.has_value());
      EXPECT_EQ(r->addresses, row.want);
      EXPECT_FALSE(r->from_cache);
    }
  }
  EXPECT_EQ(server_.total_queries(), 0u);
  EXPECT_EQ(resolver->stats().cache_hits, 0u);
}

TEST_F(ResolverTest, BadNamesFailWithoutQuery) {
  auto resolver = make(options());
  for (const std::string& name : {std::string(), std::string(300, 'a'), std::string("a\0b", 3)}) {
    const Result<Answer> r = resolve(*resolver, name);
    ASSERT_FALSE(r.has_value());
    EXPECT_EQ(r.error(), make_error_code(Errc::upstream_dns_failed));
  }
  EXPECT_EQ(server_.total_queries(), 0u);
}

TEST_F(ResolverTest, ConcurrentLookupsShareOneQuery) {
  server_.add_record("shared.test", "192.0.2.1", 60);
  server_.add_record("shared.test", "2001:db8::1", 60);
  auto resolver = make(options());
  const auto first = spawn(*resolver, "shared.test");
  const auto second = spawn(*resolver, "shared.test");
  run_until([&] { return first->has_value() && second->has_value(); });
  ASSERT_TRUE(first->has_value() && second->has_value());
  ASSERT_TRUE(first->value().has_value());
  ASSERT_TRUE(second->value().has_value());
  EXPECT_EQ(first->value()->addresses, second->value()->addresses);
  EXPECT_EQ(server_.queries("shared.test", FakeDnsServer::kTypeA), 1u);
  EXPECT_EQ(server_.queries("shared.test", FakeDnsServer::kTypeAaaa), 1u);
  EXPECT_EQ(resolver->stats().upstream_queries, 2u);
  EXPECT_EQ(resolver->stats().lookups, 2u);
}

TEST_F(ResolverTest, DestroyingResolverCancelsPendingLookups) {
  server_.add_record("hang.test", "192.0.2.1", 60);
  server_.set_reply("hang.test", Reply::drop);
  auto resolver = make(options());
  int callbacks = 0;
  resolver->on_lookup = [&callbacks](std::chrono::nanoseconds, bool) { ++callbacks; };
  const auto first = spawn(*resolver, "hang.test");
  const auto second = spawn(*resolver, "hang.test");
  run_until([&] { return server_.queries("hang.test") == 2; });
  ASSERT_EQ(server_.queries("hang.test"), 2u);
  // Not started yet when the resolver goes away: must not touch it either.
  auto not_started = resolver->resolve("hang.test");

  resolver.reset();
  const auto third = std::make_shared<std::optional<Result<Answer>>>();
  asio::co_spawn(io_, std::move(not_started),
                 [third](const std::exception_ptr&, Result<Answer> r) { *third = std::move(r); });
  run_until([&] { return first->has_value() && second->has_value() && third->has_value(); });
  for (const auto& slot : {first, second, third}) {
    ASSERT_TRUE(slot->has_value());
    ASSERT_FALSE(slot->value().has_value());
    EXPECT_EQ(slot->value().error(), std::make_error_code(std::errc::operation_canceled));
  }
  EXPECT_EQ(callbacks, 0);
  io_.restart();
  io_.run_for(50ms);  // anything still queued must run without the resolver
}

TEST_F(ResolverTest, CancelledCallerLeavesResolverUsable) {
  using namespace asio::experimental::awaitable_operators;
  server_.add_record("hang.test", "192.0.2.1", 60);
  server_.set_reply("hang.test", Reply::drop);
  server_.add_record("fine.test", "192.0.2.2", 60);
  auto resolver = make(options());
  std::optional<std::size_t> winner;
  asio::co_spawn(
      io_,
      [](Resolver* r) -> asio::awaitable<std::size_t> {
        asio::steady_timer timer(co_await asio::this_coro::executor, 50ms);
        const auto v = co_await (r->resolve("hang.test") || timer.async_wait(asio::use_awaitable));
        co_return v.index();
      }(resolver.get()),
      [&winner](const std::exception_ptr& e, std::size_t index) {
        if (e) std::rethrow_exception(e);
        winner = index;
      });
  run_until([&] { return winner.has_value(); });
  EXPECT_EQ(winner, 1u);  // the timer
  const Result<Answer> r = resolve(*resolver, "fine.test");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->addresses, ips({"192.0.2.2"}));
}

TEST_F(ResolverTest, OnLookupReportsUpstreamLookups) {
  server_.add_record("ok.test", "192.0.2.1", 60);
  auto resolver = make(options());
  std::vector<bool> reports;
  resolver->on_lookup = [&reports](std::chrono::nanoseconds latency, bool ok) {
    EXPECT_GT(latency.count(), 0);
    reports.push_back(ok);
  };
  ASSERT_TRUE(resolve(*resolver, "ok.test").has_value());
  ASSERT_TRUE(resolve(*resolver, "ok.test").has_value());  // cache hit: not reported
  EXPECT_FALSE(resolve(*resolver, "nope.test").has_value());
  EXPECT_EQ(reports, (std::vector<bool>{true, false}));
  const ResolverStats stats = resolver->stats();
  EXPECT_EQ(stats.lookups, 3u);
  EXPECT_EQ(stats.cache_hits, 1u);
  EXPECT_EQ(stats.failures, 1u);
  EXPECT_EQ(stats.upstream_queries, 4u);
}

TEST_F(ResolverTest, ConstructorRejectsBadOptions) {
  for (const char* server : {"dns.example", "1.2.3.4:0", "1.2.3.4:70000", "[::1", "127.1"}) {
    SCOPED_TRACE(server);
    auto opts = options();
    opts.servers = {server};
    EXPECT_THROW(make(opts), std::runtime_error);
  }
  auto opts = options();
  opts.timeout = 0ms;
  EXPECT_THROW(make(opts), std::runtime_error);
  opts = options();
  opts.servers = {"[::1]:5353", "::1", "192.0.2.53", server_.address()};
  EXPECT_NO_THROW(make(opts));
  EXPECT_NO_THROW(make(ResolverOptions{}));  // servers from /etc/resolv.conf
}

}  // namespace
}  // namespace sandgate::dns
