// reload_config: only the drop-ins that changed are read again, and the result is the one
// load_config gives (sandboxes, decisions, errors).
#include <gtest/gtest.h>

#include <filesystem>
#include <optional>
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
  // A name that is not a drop-in's and is now a link (a swapped "..data") has the directory
  // listed: new files are read, files under the inode they were read with are not.
  fs::create_directories(dir_.path() / "sandboxes.d" / "..v1");
  fs::create_directory_symlink("..v1", dir_.path() / "sandboxes.d" / "..data");
  const Config swapped = reload_config(next, std::vector<std::string>{"..data"});
  EXPECT_EQ(ids(swapped), (std::vector<std::string>{"a", "b", "c", "d", "main-one"}));
  EXPECT_EQ(swapped.changes->added, (std::vector<std::string>{"d"}));
  // A drop-in linked into another directory (renamed into place as a link) is stat'ed
  // through the link.
  fs::create_directories(dir_.path() / "volume-v1");
  dir_.write("volume-v1/e.toml", drop_in("e", "10.64.0.18"));
  fs::create_symlink(dir_.path() / "volume-v1" / "e.toml",
                     dir_.path() / "sandboxes.d" / "e.toml.tmp.1");
  fs::rename(dir_.path() / "sandboxes.d" / "e.toml.tmp.1", dir_.path() / "sandboxes.d" / "e.toml");
  const Config linked = reload_config(swapped, std::vector<std::string>{"e.toml.tmp.1", "e.toml"});
  EXPECT_EQ(linked.changes->added, (std::vector<std::string>{"e"}));
  // With a drop-in that is a link, any other name lists the directory (the link's target may
  // have moved), even one that is gone.
  fs::create_directories(dir_.path() / "volume-v2");
  dir_.write("volume-v2/e.toml", drop_in("e", "10.64.0.18", "allow = [\"own.example\"]\n"));
  fs::remove(dir_.path() / "sandboxes.d" / "e.toml");
  fs::create_symlink(dir_.path() / "volume-v2" / "e.toml", dir_.path() / "sandboxes.d" / "e.toml");
  const Config relinked = reload_config(linked, std::vector<std::string>{"..gone"});
  EXPECT_EQ(relinked.changes->added, (std::vector<std::string>{"e"}));
  ASSERT_NE(relinked.find_sandbox("e"), nullptr);
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

TEST_F(Reload, NamesThatAreGoneOrRegularFilesAreNotListed) {
  // The launcher's temp files, renamed into place by the time the burst ends: only the
  // drop-in names are looked at, so a drop-in no event named is not seen.
  dir_.write("sandboxes.d/d.toml", drop_in("d", "10.64.0.14"));
  dir_.write("sandboxes.d/notes.txt", "not a drop-in\n");
  const Config next =
      reload_config(first_, std::vector<std::string>{".c.tmp", "c.toml.tmp.9", "notes.txt"});
  ASSERT_TRUE(next.changes);
  EXPECT_TRUE(next.changes->added.empty());
  EXPECT_EQ(ids(next), (std::vector<std::string>{"a", "b", "main-one"}));
  dir_.write("sandboxes.d/c.toml", drop_in("c", "10.64.0.10"));
  const Config named = reload_config(next, std::vector<std::string>{"c.toml.tmp.9", "c.toml"});
  EXPECT_EQ(named.changes->added, (std::vector<std::string>{"c"}));
  // A directory among the names has the directory listed.
  fs::create_directories(dir_.path() / "sandboxes.d" / "sub");
  const Config listed = reload_config(named, std::vector<std::string>{"sub"});
  EXPECT_EQ(listed.changes->added, (std::vector<std::string>{"d"}));
}

// Every field of the config, and every sandbox as load_config reads it.
void expect_same_config(const Config& a, const Config& b) {
  EXPECT_EQ(a.path, b.path);
  EXPECT_EQ(a.workers, b.workers);
  ASSERT_EQ(a.listeners.explicit_proxy.size(), b.listeners.explicit_proxy.size());
  EXPECT_EQ(a.listeners.explicit_proxy[0].text, b.listeners.explicit_proxy[0].text);
  EXPECT_EQ(a.limits.max_connections, b.limits.max_connections);
  EXPECT_EQ(a.limits.header_timeout, b.limits.header_timeout);
  EXPECT_EQ(a.dns.servers, b.dns.servers);
  EXPECT_EQ(a.logging.audit, b.logging.audit);
  EXPECT_EQ(a.launcher.state_dir, b.launcher.state_dir);
  EXPECT_EQ(a.interception, b.interception);
  EXPECT_EQ(a.sandboxes_dir, b.sandboxes_dir);
  EXPECT_EQ(a.placeholder_key_file, b.placeholder_key_file);
  ASSERT_EQ(ids(a), ids(b));
  for (const Sandbox& x : a.sandboxes) {
    const Sandbox& y = *b.find_sandbox(x.spec.id);
    EXPECT_EQ(x.file, y.file) << x.spec.id;
    EXPECT_EQ(x.profile, y.profile) << x.spec.id;
    EXPECT_EQ(x.token, y.token) << x.spec.id;
    EXPECT_EQ(x.sources, y.sources) << x.spec.id;
    EXPECT_EQ(x.in_drop_in, y.in_drop_in) << x.spec.id;
    EXPECT_EQ(x.launcher_made, y.launcher_made) << x.spec.id;
    EXPECT_EQ(x.spec.ports, y.spec.ports) << x.spec.id;
    EXPECT_EQ(x.spec.allow.size(), y.spec.allow.size()) << x.spec.id;
  }
  expect_same_decisions(a, b);
}

// An incremental reload equals a whole load of the same files, step after step (add,
// rewrite, remove, rename), and keeps every field of the main file's (a field reload_config
// forgot would come back as its default here).
TEST_F(Reload, EachStepEqualsAWholeLoad) {
  dir_.write("sandgate.toml", "workers = 3\n" + std::string(kMain) +
                                  "[listeners]\nexplicit = [\"127.0.0.1:3999\"]\n"
                                  "[limits]\nmax_connections = 77\nheader_timeout_ms = 1234\n"
                                  "[dns]\nservers = [\"127.0.0.53\"]\n[log]\naudit = \"off\"\n"
                                  "[launcher]\nstate_dir = \"/tmp/sg-reload-state\"\n");
  Config current = load_config(main_);
  EXPECT_EQ(current.workers, 3u);
  const auto step = [&](const std::optional<std::vector<std::string>>& names) {
    Config next = reload_config(current, names);
    EXPECT_TRUE(next.changes);
    expect_same_config(next, load_config(main_));
    current = std::move(next);
  };
  const fs::path d = dir_.path() / "sandboxes.d";
  for (int i = 0; i < 150; ++i) {  // several chunks of the index
    dir_.write("sandboxes.d/n" + std::to_string(1000 + i) + ".toml",
               drop_in("n" + std::to_string(1000 + i), "10.65.0." + std::to_string(i)));
  }
  step(std::nullopt);
  dir_.write("sandboxes.d/c.toml", drop_in("c", "10.64.0.10", "allow = [\"own.example\"]\n"));
  step(std::vector<std::string>{"c.toml"});
  dir_.write("sandboxes.d/b.toml", drop_in("b", "10.64.0.6", "ports = [8443]\n"));
  step(std::vector<std::string>{"b.toml"});
  fs::remove(d / "a.toml");
  step(std::vector<std::string>{"a.toml"});
  fs::rename(d / "c.toml", d / "z.toml");
  step(std::vector<std::string>{"c.toml", "z.toml"});
  fs::remove(d / "n1075.toml");
  dir_.write("sandboxes.d/n1075b.toml", drop_in("n1075b", "10.65.0.75"));  // its address
  step(std::vector<std::string>{"n1075.toml", "n1075b.toml"});
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
