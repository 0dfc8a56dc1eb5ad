#include "tls/leaf_cache.hpp"

#include <gtest/gtest.h>
#include <openssl/x509v3.h>

#include <condition_variable>
#include <latch>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "support/eventually.hpp"
#include "support/temp_dir.hpp"
#include "tls/ca_init.hpp"

namespace sandgate::tls {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::system_clock;
using LeafResult = Result<std::shared_ptr<const Leaf>>;

// One real CA for the whole suite: minting is what the cache saves, so the leaves are real.
const std::shared_ptr<const Authority>& authority() {
  static const sandgate::test::TempDir tmp;  // the CA is in memory once loaded
  static const std::shared_ptr<const Authority> ca = [] {
    const CaFiles files = create_ca(tmp.path() / "ca", false).files;
    return Authority::load(files.cert, files.key);
  }();
  return ca;
}

LeafCacheOptions options(std::size_t capacity,
                         std::chrono::seconds renew_before = std::chrono::hours(12)) {
  LeafCacheOptions o;
  o.capacity = capacity;
  o.renew_before = renew_before;
  return o;
}

LeafOptions valid_for(std::chrono::seconds validity) {
  LeafOptions o;
  o.validity = validity;
  return o;
}

// A minter that counts its calls per name and mints real 24 h leaves.
struct CountingMinter {
  std::mutex mutex;
  std::map<std::string, int> calls;
  std::function<Clock::time_point()> clock;  // the minting instant; unset = now

  LeafCache::Minter minter() {
    return [this](std::string_view name) -> LeafResult {
      {
        const std::lock_guard lock(mutex);
        ++calls[std::string(name)];
      }
      LeafOptions leaf = valid_for(24h);
      if (clock) leaf.now = clock();
      return authority()->mint(name, leaf);
    };
  }
  int count(const std::string& name) {
    const std::lock_guard lock(mutex);
    return calls[name];
  }
};

TEST(LeafCache, HitReturnsTheSameLeaf) {
  CountingMinter m;
  LeafCache cache(m.minter(), options(4));
  const LeafResult first = cache.get("example.com");
  const LeafResult second = cache.get("example.com");
  ASSERT_TRUE(first && second);
  EXPECT_EQ(*first, *second);
  EXPECT_EQ((*first)->name(), "example.com");
  EXPECT_EQ(m.count("example.com"), 1);
  const LeafCacheStats s = cache.stats();
  EXPECT_EQ(s.hits, 1u);
  EXPECT_EQ(s.misses, 1u);
  EXPECT_EQ(s.mints, 1u);
  EXPECT_EQ(s.size, 1u);
}

TEST(LeafCache, MayMintIsAskedOnlyBeforeAMintAndCanRefuseIt) {
  CountingMinter m;
  LeafCache cache(m.minter(), options(4));
  int asked = 0;
  bool allow = true;
  const auto may_mint = [&] {
    ++asked;
    return allow;
  };
  ASSERT_TRUE(cache.get("a.example", may_mint));
  EXPECT_EQ(asked, 1);
  ASSERT_TRUE(cache.get("a.example", may_mint));  // cached: not asked
  EXPECT_EQ(asked, 1);
  allow = false;
  const LeafResult refused = cache.get("b.example", may_mint);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error(), make_error_code(Errc::too_many_leaf_mints));
  EXPECT_EQ(asked, 2);
  EXPECT_EQ(m.count("b.example"), 0);  // nothing minted, nothing cached
  EXPECT_EQ(cache.stats().mints_refused, 1u);
  EXPECT_EQ(cache.stats().size, 1u);
  ASSERT_TRUE(cache.get("a.example", may_mint));  // a refusal does not touch cached names
}

TEST(LeafCache, EightConcurrentCallersShareOneMint) {
  constexpr int kThreads = 8;
  std::atomic<int> mints{0};
  LeafCache* cache_ptr = nullptr;
  bool all_waited = false;
  // The mint holds on until every caller has missed, so the other seven are surely waiting.
  LeafCache cache(
      [&](std::string_view name) -> LeafResult {
        ++mints;
        all_waited =
            sandgate::test::eventually([&] { return cache_ptr->stats().misses == kThreads; }, 10s);
        return authority()->mint(name);
      },
      options(4));
  cache_ptr = &cache;

  std::latch start(kThreads);
  std::vector<LeafResult> results(kThreads, make_error_code(Errc::internal_error));
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      start.arrive_and_wait();
      results[static_cast<std::size_t>(i)] = cache.get("same.example");
    });
  }
  for (auto& t : threads) t.join();

  EXPECT_TRUE(all_waited);
  EXPECT_EQ(mints.load(), 1);
  for (const LeafResult& r : results) {
    ASSERT_TRUE(r);
    EXPECT_EQ(*r, *results[0]);
  }
  EXPECT_EQ(cache.stats().mints, 1u);
  EXPECT_EQ(cache.stats().misses, std::uint64_t{kThreads});
}

TEST(LeafCache, OtherNamesProceedWhileOneMints) {
  std::mutex mutex;
  std::condition_variable cv;
  bool release = false;
  bool slow_timed_out = false;
  LeafCache cache(
      [&](std::string_view name) -> LeafResult {
        if (name == "slow.example") {
          std::unique_lock lock(mutex);
          slow_timed_out = !cv.wait_for(lock, 10s, [&] { return release; });
        }
        return authority()->mint(name);
      },
      options(4));

  std::thread slow([&] { EXPECT_TRUE(cache.get("slow.example")); });
  ASSERT_TRUE(sandgate::test::eventually([&] { return cache.stats().mints == 1; }));
  // With the slow mint still running, another name is minted and a hit is served.
  EXPECT_TRUE(cache.get("fast.example"));
  EXPECT_TRUE(cache.get("fast.example"));
  {
    const std::lock_guard lock(mutex);
    release = true;
  }
  cv.notify_all();
  slow.join();
  EXPECT_FALSE(slow_timed_out) << "fast.example waited for slow.example's mint";
  EXPECT_EQ(cache.stats().hits, 1u);
  EXPECT_EQ(cache.stats().size, 2u);
}

TEST(LeafCache, EvictsTheLeastRecentlyUsed) {
  CountingMinter m;
  LeafCache cache(m.minter(), options(2));
  ASSERT_TRUE(cache.get("a.example"));
  ASSERT_TRUE(cache.get("b.example"));
  ASSERT_TRUE(cache.get("a.example"));  // a is now the most recently used
  ASSERT_TRUE(cache.get("c.example"));  // evicts b
  EXPECT_EQ(cache.stats().evictions, 1u);
  EXPECT_EQ(cache.stats().size, 2u);

  ASSERT_TRUE(cache.get("a.example"));
  ASSERT_TRUE(cache.get("c.example"));
  EXPECT_EQ(m.count("a.example"), 1);
  EXPECT_EQ(m.count("c.example"), 1);
  ASSERT_TRUE(cache.get("b.example"));  // minted again; evicts a (c was used after it)
  EXPECT_EQ(m.count("b.example"), 2);
  ASSERT_TRUE(cache.get("c.example"));
  EXPECT_EQ(m.count("c.example"), 1);
  ASSERT_TRUE(cache.get("a.example"));
  EXPECT_EQ(m.count("a.example"), 2);
  EXPECT_EQ(cache.stats().evictions, 3u);
  EXPECT_EQ(cache.stats().size, 2u);
}

TEST(LeafCache, EvictedLeafStaysUsableByItsHolder) {
  CountingMinter m;
  LeafCache cache(m.minter(), options(1));
  const LeafResult held = cache.get("a.example");
  ASSERT_TRUE(held);
  ASSERT_TRUE(cache.get("b.example"));
  EXPECT_EQ(cache.stats().evictions, 1u);
  EXPECT_NE(SSL_CTX_get0_certificate((*held)->server_context().get()), nullptr);
}

TEST(LeafCache, RenewsALeafNearItsExpiry) {
  CountingMinter m;
  Clock::time_point now = Clock::now();
  m.clock = [&] { return now; };
  LeafCacheOptions clocked = options(4, 2h);
  clocked.clock = [&] { return now; };
  LeafCache cache(m.minter(), clocked);
  const LeafResult first = cache.get("example.com");
  ASSERT_TRUE(first);
  now = (*first)->not_after() - 2h - 1s;  // just before the renewal window: still a hit
  EXPECT_EQ(*cache.get("example.com"), *first);
  now += 2s;  // inside it: minted again, and the new leaf is cached
  const LeafResult renewed = cache.get("example.com");
  ASSERT_TRUE(renewed);
  EXPECT_NE(*renewed, *first);
  EXPECT_EQ(*cache.get("example.com"), *renewed);
  EXPECT_EQ(m.count("example.com"), 2);
  EXPECT_EQ(cache.stats().size, 1u);
  EXPECT_EQ(cache.stats().evictions, 0u);
}

TEST(LeafCache, AFailedMintIsNotCached) {
  int calls = 0;
  LeafCache cache(
      [&](std::string_view name) -> LeafResult {
        if (++calls == 1) return make_error_code(Errc::internal_error);
        return authority()->mint(name);
      },
      options(4));
  const LeafResult failed = cache.get("example.com");
  ASSERT_FALSE(failed);
  EXPECT_EQ(failed.error(), make_error_code(Errc::internal_error));
  EXPECT_TRUE(cache.get("example.com"));
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(cache.stats().mint_failures, 1u);
  EXPECT_EQ(cache.stats().size, 1u);
}

TEST(LeafCache, AThrowingMintReachesEveryWaiterAndIsNotCached) {
  int calls = 0;
  LeafCache cache(
      [&](std::string_view name) -> LeafResult {
        if (++calls == 1) throw std::bad_alloc();
        return authority()->mint(name);
      },
      options(4));
  EXPECT_THROW(cache.get("example.com"), std::bad_alloc);
  EXPECT_TRUE(cache.get("example.com"));
  EXPECT_EQ(cache.stats().mint_failures, 1u);
}

TEST(LeafCache, WithAnAuthority) {
  LeafCache cache(authority(), valid_for(6h), options(8, 1h));
  const LeafResult leaf = cache.get("example.com");
  ASSERT_TRUE(leaf);
  EXPECT_EQ(X509_check_host((*leaf)->certificate(), "example.com", 0, 0, nullptr), 1);
  EXPECT_LE((*leaf)->not_after(), Clock::now() + 6h);
  // A name the authority refuses is an error, not a cached leaf.
  const LeafResult bad = cache.get("*.example.com");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error(), std::make_error_code(std::errc::invalid_argument));
  EXPECT_EQ(cache.stats().size, 1u);
}

TEST(LeafCache, RefusesOptionsThatCouldNeverHit) {
  EXPECT_THROW(LeafCache(authority(), valid_for(2h), options(4, 2h)), std::invalid_argument);
  EXPECT_THROW(
      LeafCache([](std::string_view) -> LeafResult { return std::shared_ptr<const Leaf>(); },
                options(0)),
      std::invalid_argument);
}

}  // namespace
}  // namespace sandgate::tls
