#pragma once

// The fixture of the launcher's integration tests: a private "test host" network namespace
// (sgt-<pid>-<n>) in which the real daemon and the real sandgate-launch run (entered with
// nsenter --net, so the /run/netns mounts the launcher makes stay visible; deleting it removes
// every link and nft table made inside). Sandbox ids carry the pid.

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "support/sandgate_process.hpp"
#include "support/subprocess.hpp"
#include "support/temp_dir.hpp"

namespace sandgate::test {

inline std::string launch_binary() {
  const char* bin = std::getenv("SANDGATE_LAUNCH_BIN");
  return bin != nullptr ? bin : SANDGATE_DEFAULT_LAUNCH_BIN;
}

inline std::string unique_suffix() {
  static int counter = 0;
  return std::to_string(::getpid()) + "-" + std::to_string(++counter);
}

// A named network namespace with lo up, deleted with everything in it on destruction.
class TestHost {
 public:
  TestHost() : name_("sgt-" + unique_suffix()) {
    EXPECT_EQ(run_command({"ip", "netns", "add", name_}).exit_code, 0);
    EXPECT_EQ(run_command({"ip", "-n", name_, "link", "set", "lo", "up"}).exit_code, 0);
  }
  ~TestHost() { run_command({"ip", "netns", "del", name_}); }
  std::vector<std::string> enter() const { return {"nsenter", "--net=/run/netns/" + name_}; }

 private:
  std::string name_;
};

inline std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (const char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

class LauncherFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(::geteuid(), 0U) << "the launcher tests need root";
    ASSERT_FALSE(launch_binary().empty()) << "SANDGATE_LAUNCH_BIN is not set";
    std::filesystem::create_directories(dir_.path() / "sbx");
    std::filesystem::create_directories(dir_.path() / "state");
  }
  void TearDown() override {
    for (const std::string& id : ids_) {
      run_command({"ip", "netns", "del", "sg-" + id});
      std::filesystem::remove_all("/etc/netns/sg-" + id);
    }
  }

  // A sandbox id unique to this run.
  std::string id(const std::string& name) {
    ids_.push_back(name + "-" + unique_suffix());
    return ids_.back();
  }
  std::string state_dir() const {
    return state_dir_.empty() ? (dir_.path() / "state").string() : state_dir_;
  }
  std::string sandboxes_dir() const { return (dir_.path() / "sbx").string(); }
  std::string tables(const std::string& pool = "10.201.0.0/16") const {
    return "[launcher]\nstate_dir = \"" + state_dir() + "\"\npool = \"" + pool +
           "\"\nready_timeout_ms = 5000\n" + launcher_extra_ +
           "\n[profiles.default]\nallow = [\"example.com\"]\n" + extra_tables_;
  }
  void start_daemon(const std::string& pool = "10.201.0.0/16") {
    SandgateOptions options;
    options.listeners = "transparent = [\"0.0.0.0:15001\"]\ndns = [\"0.0.0.0:15053\"]";
    options.sandboxes_dir = sandboxes_dir();
    options.admin_listen = "127.0.0.1:19090";
    options.wrapper = host_.enter();
    options.tables = tables(pool);
    daemon_ = std::make_unique<SandgateProcess>(options);
    config_ = daemon_->config_path();
  }
  // Runs sandgate-launch in the test host, with `prefix` (e.g. env VAR=x) before it.
  CommandResult launch(const std::vector<std::string>& args,
                       const std::vector<std::string>& prefix = {}) {
    std::vector<std::string> argv = host_.enter();
    argv.insert(argv.end(), prefix.begin(), prefix.end());
    argv.push_back(launch_binary());
    argv.push_back("--config");
    argv.push_back(config_);
    argv.insert(argv.end(), args.begin(), args.end());
    return run_command(argv, std::chrono::seconds(30));
  }
  CommandResult in_host(std::vector<std::string> args) {
    std::vector<std::string> argv = host_.enter();
    argv.insert(argv.end(), args.begin(), args.end());
    return run_command(argv);
  }
  // Link names and inet table names in the test host.
  std::vector<std::string> host_links() {
    std::vector<std::string> names;
    const auto doc = boost::json::parse(in_host({"ip", "-j", "link", "show"}).out);
    for (const auto& l : doc.as_array()) {
      names.emplace_back(l.as_object().at("ifname").as_string());
    }
    return names;
  }
  std::vector<std::string> host_tables() {
    std::vector<std::string> names;
    const auto doc = boost::json::parse(in_host({"nft", "-j", "list", "tables"}).out);
    for (const auto& item : doc.as_object().at("nftables").as_array()) {
      if (const auto* t = item.as_object().if_contains("table")) {
        names.emplace_back(t->as_object().at("name").as_string());
      }
    }
    return names;
  }
  void expect_nothing_left(const std::string& sandbox) {
    EXPECT_FALSE(std::filesystem::exists("/run/netns/sg-" + sandbox)) << sandbox;
    EXPECT_FALSE(std::filesystem::exists("/etc/netns/sg-" + sandbox)) << sandbox;
    EXPECT_EQ(host_links(), std::vector<std::string>{"lo"});
    EXPECT_EQ(host_tables(), std::vector<std::string>{});
    EXPECT_TRUE(std::filesystem::is_empty(sandboxes_dir()));
    EXPECT_TRUE(std::filesystem::is_empty(std::filesystem::path(state_dir()) / "sandboxes"));
  }

  TestHost host_;
  TempDir dir_;
  std::unique_ptr<SandgateProcess> daemon_;
  std::string config_;
  std::vector<std::string> ids_;
  std::string state_dir_;       // "" = dir_/state
  std::string launcher_extra_;  // more [launcher] lines
  std::string extra_tables_;    // more tables after the profile
};

}  // namespace sandgate::test
