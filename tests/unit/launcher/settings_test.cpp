#include "launcher/settings.hpp"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>

namespace sandgate::launcher {
namespace {

// An empty drop-in directory for the config to name (it must exist).
class EmptyDir {
 public:
  EmptyDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "sg-launch-XXXXXX").string();
    path_ = ::mkdtemp(pattern.data());
  }
  ~EmptyDir() { std::filesystem::remove_all(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::string head(const EmptyDir& dir) {
  return "sandboxes_dir = \"" + dir.path() + "\"\n[listeners]\nexplicit = [\"127.0.0.1:3128\"]\n";
}

std::string error_of(const std::string& listeners) {
  const EmptyDir dir;
  const auto config = config::load_config_from_string(head(dir) + listeners, "/etc/s.toml");
  try {
    settings_from_config(config, true);
  } catch (const LaunchError& e) {
    EXPECT_EQ(e.exit_code(), 2);
    return e.what();
  }
  return "";
}

TEST(LauncherSettings, ListenerChecks) {
  struct Row {
    const char* listeners;
    const char* error;
  };
  const Row rows[] = {
      {"transparent = [\"0.0.0.0:15001\"]\ndns = [\"0.0.0.0:15053\"]\nadmin = \"127.0.0.1:9090\"\n",
       ""},
      {"dns = [\"0.0.0.0:15053\"]\nadmin = \"127.0.0.1:9090\"\n",
       "listeners.transparent is not configured in /etc/s.toml; add transparent = "
       "[\"0.0.0.0:PORT\"] under [listeners]"},
      {"transparent = [\"127.0.0.1:15001\"]\ndns = [\"0.0.0.0:15053\"]\n",
       "listeners.transparent in /etc/s.toml has no 0.0.0.0:PORT address; nft redirect delivers "
       "to the host-side veth address, so add transparent = [\"0.0.0.0:PORT\"]"},
      {"transparent = [\"0.0.0.0:15001\"]\ndns = [\"0.0.0.0:0\"]\n",
       "listeners.dns 0.0.0.0:0 in /etc/s.toml needs a fixed port for the launcher's nftables "
       "redirect"},
      {"transparent = [\"0.0.0.0:15001\"]\ndns = [\"0.0.0.0:15053\"]\n",
       "listeners.admin is not configured with a fixed port in /etc/s.toml; the launcher asks it "
       "whether the daemon activated a sandbox, so add admin = \"127.0.0.1:PORT\" under "
       "[listeners]"},
  };
  for (const Row& row : rows) EXPECT_EQ(error_of(row.listeners), row.error) << row.listeners;
}

TEST(LauncherSettings, AdminWildcardConnectsToLoopback) {
  const EmptyDir dir;
  const auto config =
      config::load_config_from_string(head(dir) + "admin = \"0.0.0.0:9091\"\n", "/etc/s.toml");
  const Settings s = settings_from_config(config, false);
  EXPECT_EQ(s.admin_host, "127.0.0.1");
  EXPECT_EQ(s.admin_port, 9091);
  EXPECT_EQ(s.state_dir, "/run/sandgate");
  EXPECT_EQ(s.pool.to_string(), "10.201.0.0/16");
}

}  // namespace
}  // namespace sandgate::launcher
