// reload_config: only the drop-ins that changed are read again, and the result is the one
// load_config gives (sandboxes, decisions, errors).
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "policy/policy.hpp"
#include "support/temp_dir.hpp"

namespace sandgate::config {
namespace {

namespace fs = std::filesystem;
using test::TempDir;

constexpr std::string_view kMain = R"(sandboxes_dir = "sandboxes.d"
[profiles.p]
allow = ["github.com", "*.npmjs.org"]
deny = ["gist.github.com"]

[sandboxes.main-one]
token = "m1"
profile = "p"
)";

std::string drop_in(const std::string& id, const std::string& source,
                    const std::string& extra = "") {
  return "# written by sandgate-launch\nid = \"" + id + "\"\nprofile = \"p\"\nsources = [\"" +
         source + "\"]\n" + extra;
}

std::vector<std::string> ids(const Config& c) {
  std::vector<std::string> out;
  for (const Sandbox& s : c.sandboxes) out.push_back(s.spec.id);
  return out;
}

// The error lines of a load that must fail.
template <class Load>
std::vector<std::string> errors_of(Load load) {
  try {
    load();
  } catch (const ConfigErrors& e) {
    std::vector<std::string> out;
    for (const ConfigError& error : e.errors()) out.push_back(error.to_string());
    return out;
  }
  ADD_FAILURE() << "expected ConfigErrors";
  return {};
}

// Every sandbox of `a` and `b` decides alike on a few destinations.
void expect_same_decisions(const Config& a, const Config& b) {
  ASSERT_EQ(ids(a), ids(b));
  const auto pa = a.build_policy();
  const auto pb = b.build_policy();
  for (const Sandbox& s : a.sandboxes) {
    for (const char* host : {"github.com", "gist.github.com", "x.npmjs.org", "own.example"}) {
      const policy::Query q{s.spec.id, host, 443, policy::EntryMode::connect};
      const policy::Decision da = pa->decide(q);
      const policy::Decision db = pb->decide(q);
      EXPECT_EQ(da.allowed, db.allowed) << s.spec.id << " " << host;
      EXPECT_EQ(da.rule, db.rule) << s.spec.id << " " << host;
    }
  }
}

class Reload : public ::testing::Test {
 protected:
  void SetUp() override {
    main_ = dir_.write("sandgate.toml", kMain);
    fs::create_directories(dir_.path() / "sandboxes.d");
    dir_.write("sandboxes.d/a.toml", drop_in("a", "10.64.0.2"));
    dir_.write("sandboxes.d/b.toml", drop_in("b", "10.64.0.6", "allow = [\"own.example\"]\n"));
    first_ = load_config(main_);
  }

  TempDir dir_;
  std::string main_;
  Config first_;
};

TEST_F(Reload, NothingChangedKeepsEverySandbox) {
  const Config next = reload_config(first_);
  ASSERT_TRUE(next.changes);
  EXPECT_TRUE(next.changes->removed.empty());
  EXPECT_TRUE(next.changes->added.empty());
  expect_same_decisions(next, first_);
}

TEST_F(Reload, ANewDropInIsTheOnlyOneRead) {
  dir_.write("sandboxes.d/c.toml", drop_in("c", "10.64.0.10", "allow = [\"own.example\"]\n"));
  const Config next = reload_config(first_);
  ASSERT_TRUE(next.changes);
  EXPECT_EQ(next.changes->added, (std::vector<std::string>{"c"}));
  EXPECT_TRUE(next.changes->removed.empty());
  EXPECT_EQ(ids(next), (std::vector<std::string>{"a", "b", "c", "main-one"}));
  // The new sandbox shares the profile's lists with the ones read before.
  EXPECT_EQ(next.find_sandbox("c")->spec.profile, first_.find_sandbox("a")->spec.profile);
  EXPECT_EQ(next.find_sandbox("c")->sources.size(), 1u);
  expect_same_decisions(next, load_config(main_));
}

TEST_F(Reload, ARemovedDropInRemovesItsSandbox) {
  fs::remove(dir_.path() / "sandboxes.d" / "a.toml");
  const Config next = reload_config(first_);
  ASSERT_TRUE(next.changes);
  EXPECT_EQ(next.changes->removed, (std::vector<std::string>{"a"}));
  EXPECT_TRUE(next.changes->added.empty());
  EXPECT_EQ(ids(next), (std::vector<std::string>{"b", "main-one"}));
  expect_same_decisions(next, load_config(main_));
}

TEST_F(Reload, ARewrittenDropInReplacesItsSandbox) {
  dir_.write("sandboxes.d/a.toml",
             drop_in("a", "10.64.0.2", "allow = [\"own.example\", \"more.example\"]\n"));
  const Config next = reload_config(first_);
  ASSERT_TRUE(next.changes);
  EXPECT_EQ(next.changes->removed, (std::vector<std::string>{"a"}));
  EXPECT_EQ(next.changes->added, (std::vector<std::string>{"a"}));
  EXPECT_EQ(next.find_sandbox("a")->spec.allow.size(), 2u);
  expect_same_decisions(next, load_config(main_));
}

TEST_F(Reload, ChainedReloadsTrackEachStep) {
  dir_.write("sandboxes.d/c.toml", drop_in("c", "10.64.0.10"));
  const Config second = reload_config(first_);
  fs::remove(dir_.path() / "sandboxes.d" / "b.toml");
  const Config third = reload_config(second, std::vector<std::string>{"b.toml"});
  ASSERT_TRUE(third.changes);
  EXPECT_EQ(third.changes->removed, (std::vector<std::string>{"b"}));
  EXPECT_EQ(ids(third), (std::vector<std::string>{"a", "c", "main-one"}));
  expect_same_decisions(third, load_config(main_));
}

TEST_F(Reload, NamedChangesAreTheOnlyOnesLookedAt) {
  dir_.write("sandboxes.d/c.toml", drop_in("c", "10.64.0.10"));
  dir_.write("sandboxes.d/d.toml", drop_in("d", "10.64.0.14"));
  const Config next = reload_config(first_, std::vector<std::string>{"c.toml"});
  ASSERT_TRUE(next.changes);
  EXPECT_EQ(next.changes->added, (std::vector<std::string>{"c"}));
  EXPECT_EQ(ids(next), (std::vector<std::string>{"a", "b", "c", "main-one"}));
  // A name that is not a drop-in's (a swapped "..data" link) has the directory listed: new
  // files are read, files under the inode they were read with are not.
  const Config swapped = reload_config(next, std::vector<std::string>{"..data"});
  EXPECT_EQ(ids(swapped), (std::vector<std::string>{"a", "b", "c", "d", "main-one"}));
  EXPECT_EQ(swapped.changes->added, (std::vector<std::string>{"d"}));
  // A drop-in linked into another directory is stat'ed through the link.
  fs::create_directories(dir_.path() / "volume-v1");
  dir_.write("volume-v1/e.toml", drop_in("e", "10.64.0.18"));
  fs::create_symlink(dir_.path() / "volume-v1" / "e.toml", dir_.path() / "sandboxes.d" / "e.toml");
  const Config linked = reload_config(swapped, std::vector<std::string>{"e.toml.tmp.1"});
  EXPECT_EQ(linked.changes->added, (std::vector<std::string>{"e"}));
  fs::create_directories(dir_.path() / "volume-v2");
  dir_.write("volume-v2/e.toml", drop_in("e", "10.64.0.18", "allow = [\"own.example\"]\n"));
  fs::remove(dir_.path() / "sandboxes.d" / "e.toml");
  fs::create_symlink(dir_.path() / "volume-v2" / "e.toml", dir_.path() / "sandboxes.d" / "e.toml");
  const Config relinked = reload_config(linked, std::vector<std::string>{"..data"});
  EXPECT_EQ(relinked.changes->added, (std::vector<std::string>{"e"}));
  EXPECT_EQ(relinked.find_sandbox("e")->spec.allow.size(), 1u);
  // Without names, every stamp is checked.
  const Config all = reload_config(relinked);
  EXPECT_EQ(ids(all), (std::vector<std::string>{"a", "b", "c", "d", "e", "main-one"}));
  EXPECT_TRUE(all.changes->added.empty());
}

TEST_F(Reload, AChangedMainFileIsLoadedWhole) {
  dir_.write("sandgate.toml", std::string(kMain) + "\n[sandboxes.main-two]\ntoken = \"m2\"\n");
  const Config next = reload_config(first_);
  EXPECT_FALSE(next.changes);
  EXPECT_EQ(ids(next), (std::vector<std::string>{"a", "b", "main-one", "main-two"}));
}

TEST_F(Reload, ErrorsAreThoseOfAWholeLoad) {
  dir_.write("sandboxes.d/c.toml", "id = \"c\"\nprofile = \"nope\"\n");
  const auto reloaded = errors_of([&] { reload_config(first_); });
  EXPECT_FALSE(reloaded.empty());
  EXPECT_EQ(reloaded, errors_of([&] { load_config(main_); }));
}

TEST_F(Reload, AClashWithAKeptSandboxIsTheWholeLoadsError) {
  dir_.write("sandboxes.d/0-dup.toml", drop_in("b", "10.64.0.30"));
  const auto duplicate_id = errors_of([&] { reload_config(first_); });
  ASSERT_EQ(duplicate_id.size(), 1u);
  EXPECT_NE(duplicate_id[0].find("duplicate sandbox id"), std::string::npos) << duplicate_id[0];
  EXPECT_EQ(duplicate_id, errors_of([&] { load_config(main_); }));

  fs::remove(dir_.path() / "sandboxes.d" / "0-dup.toml");
  dir_.write("sandboxes.d/c.toml", drop_in("c", "10.64.0.6"));  // b's source address
  const auto duplicate_source = errors_of([&] { reload_config(first_); });
  ASSERT_EQ(duplicate_source.size(), 1u);
  EXPECT_NE(duplicate_source[0].find("already identifies another sandbox"), std::string::npos)
      << duplicate_source[0];
  EXPECT_EQ(duplicate_source, errors_of([&] { load_config(main_); }));
}

TEST_F(Reload, ASourceFreedByARemovedSandboxMayBeTaken) {
  fs::remove(dir_.path() / "sandboxes.d" / "a.toml");
  dir_.write("sandboxes.d/c.toml", drop_in("c", "10.64.0.2"));
  const Config next = reload_config(first_);
  ASSERT_TRUE(next.changes);
  EXPECT_EQ(ids(next), (std::vector<std::string>{"b", "c", "main-one"}));
}

TEST_F(Reload, InterceptionKeysInANewDropInAreRefusedAsInAWholeLoad) {
  dir_.write("sandboxes.d/c.toml", drop_in("c", "10.64.0.10", "inspect = [\"x.example\"]\n"));
  const auto reloaded = errors_of([&] { reload_config(first_); });
  ASSERT_EQ(reloaded.size(), 1u);
  EXPECT_EQ(reloaded, errors_of([&] { load_config(main_); }));
}

// The policy the daemon builds from the changes decides as one built from scratch.
TEST_F(Reload, AnIncrementalPolicyDecidesAsAFreshOne) {
  const auto before = first_.build_policy();
  fs::remove(dir_.path() / "sandboxes.d" / "a.toml");
  dir_.write("sandboxes.d/c.toml", drop_in("c", "10.64.0.10", "allow = [\"own.example\"]\n"));
  const Config next = reload_config(first_);
  ASSERT_TRUE(next.changes);
  std::vector<policy::SandboxSpec> added;
  for (const std::string& id : next.changes->added) added.push_back(next.find_sandbox(id)->spec);
  const policy::Policy incremental(*before, next.changes->removed, std::move(added));
  const auto fresh = next.build_policy();
  EXPECT_EQ(incremental.sandbox_count(), fresh->sandbox_count());
  EXPECT_FALSE(incremental.has_sandbox("a"));
  for (const char* id : {"b", "c", "main-one", "a"}) {
    for (const char* host : {"github.com", "gist.github.com", "x.npmjs.org", "own.example"}) {
      const policy::Query q{id, host, 443, policy::EntryMode::connect};
      EXPECT_EQ(incremental.decide(q).allowed, fresh->decide(q).allowed) << id << " " << host;
      EXPECT_EQ(incremental.decide(q).rule, fresh->decide(q).rule) << id << " " << host;
    }
  }
}

}  // namespace
}  // namespace sandgate::config
