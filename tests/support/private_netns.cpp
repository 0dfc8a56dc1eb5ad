#include "support/private_netns.hpp"

#include <net/if.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <vector>

#include "gtest/gtest.h"
#include "support/subprocess.hpp"

namespace sandgate::test {

namespace {

constexpr const char* kMarker = "SANDGATE_TEST_PRIVATE_NETNS";

bool inside() {
  const char* v = std::getenv(kMarker);
  return v && std::string(v) == "1";
}

// Names of every network interface in the current namespace.
std::vector<std::string> interfaces() {
  std::vector<std::string> out;
  if (struct if_nameindex* list = ::if_nameindex()) {
    for (struct if_nameindex* i = list; i->if_index != 0; ++i) out.emplace_back(i->if_name);
    ::if_freenameindex(list);
  }
  return out;
}

}  // namespace

bool enter_private_netns_or_rerun() {
  if (inside()) {
    const auto names = interfaces();
    if (names != std::vector<std::string>{"lo"}) {
      std::string all;
      for (const auto& n : names) all += n + " ";
      ADD_FAILURE() << "refusing to run: this namespace has interfaces other than lo: " << all;
      return false;
    }
    return true;
  }
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const std::string name = std::string(info->test_suite_name()) + "." + info->name();
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();

  std::vector<std::string> argv{"env", std::string(kMarker) + "=1", "unshare"};
  if (::geteuid() != 0) {
    argv.emplace_back("--user");
    argv.emplace_back("--map-root-user");
  }
  for (const char* a : {"--net", "--", "sh", "-c", "ip link set lo up && exec \"$0\" \"$@\""}) {
    argv.emplace_back(a);
  }
  argv.push_back(self);
  argv.push_back("--gtest_filter=" + name);
  argv.emplace_back("--gtest_color=no");
  const CommandResult r = run_command(argv, std::chrono::seconds(60));
  const bool ran = r.out.find("[       OK ] " + name) != std::string::npos;
  const bool skipped = r.out.find("[  SKIPPED ] " + name) != std::string::npos;
  if (r.exit_code == 0 && skipped) {
    // Pass the child's reason on (e.g. "BUG: ..." from SANDGATE_KNOWN_BUG).
    const auto at = r.out.find("Skipped\n");
    const auto end = at == std::string::npos ? at : r.out.find("\n[", at);
    const std::string why =
        at == std::string::npos ? std::string() : r.out.substr(at + 8, end - at - 8);
    [&] { GTEST_SKIP() << why; }();  // GTEST_SKIP returns void; the caller returns next
    return false;
  }
  if (r.exit_code != 0 || !ran) {
    ADD_FAILURE() << "inside the private network namespace, " << name << " "
                  << (r.timed_out ? "timed out" : "failed") << " (exit " << r.exit_code << "):\n"
                  << r.out << r.err;
  } else {
    // Keep the child's own report visible in the log.
    std::printf("[ in netns  ] %s passed inside a private network namespace\n", name.c_str());
  }
  return false;
}

bool add_loopback_address(const std::string& cidr) {
  if (!inside()) {
    ADD_FAILURE() << "add_loopback_address outside the private network namespace";
    return false;
  }
  const bool v6 = cidr.find(':') != std::string::npos;
  std::vector<std::string> argv{"ip"};
  if (v6) argv.emplace_back("-6");
  for (const char* a : {"addr", "add"}) argv.emplace_back(a);
  argv.push_back(cidr);
  argv.emplace_back("dev");
  argv.emplace_back("lo");
  if (v6) argv.emplace_back("nodad");
  const CommandResult r = run_command(argv, std::chrono::seconds(10));
  if (r.exit_code != 0) {
    ADD_FAILURE() << "ip addr add " << cidr << " failed: " << r.err;
    return false;
  }
  return true;
}

int run_tests_in_own_netns(int argc, char** argv, const char* inside_env, const char* name) {
  if (std::getenv(inside_env) == nullptr) {
    if (::geteuid() != 0) {
      std::fprintf(stderr, "%s needs root (network namespaces, nftables)\n", name);
      return 1;
    }
    ::setenv(inside_env, "1", 1);
    std::vector<char*> args{const_cast<char*>("unshare"), const_cast<char*>("--net"),
                            const_cast<char*>("--")};
    for (int i = 0; i < argc; ++i) args.push_back(argv[i]);
    args.push_back(nullptr);
    ::execvp("unshare", args.data());
    std::perror("unshare");
    return 1;
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}

void make_test_internet(const std::string& netns, const std::vector<std::string>& addresses) {
  const auto must = [](const std::vector<std::string>& argv) {
    const CommandResult r = run_command(argv, std::chrono::seconds(30));
    if (r.exit_code == 0) return;
    std::string line;
    for (const auto& a : argv) line += a + " ";
    throw std::runtime_error(line + "failed: " + r.err + r.out);
  };
  const std::string& n = netns;
  must({"ip", "link", "set", "lo", "up"});
  must({"ip", "netns", "add", n});
  must({"ip", "-n", n, "link", "set", "lo", "up"});
  must({"ip", "link", "add", "inet0", "type", "veth", "peer", "name", "wan0", "netns", n});
  must({"ip", "addr", "add", "192.0.2.1/30", "dev", "inet0"});
  must({"ip", "link", "set", "inet0", "up"});
  must({"ip", "-n", n, "addr", "add", "192.0.2.2/30", "dev", "wan0"});
  must({"ip", "-n", n, "link", "set", "wan0", "up"});
  must({"ip", "-n", n, "route", "add", "default", "via", "192.0.2.1"});
  for (const std::string& a : addresses) {
    must({"ip", "-n", n, "addr", "add", a + "/32", "dev", "lo"});
    must({"ip", "route", "add", a + "/32", "via", "192.0.2.2"});
  }
}

}  // namespace sandgate::test
