// libFuzzer target for config::load_config_from_string, the whole loader: TOML parsing, every
// section's validation, profiles merged into sandboxes, and one drop-in file. Besides "no
// crash, no sanitizer report" it checks that a config either loads into values the daemon can
// use or fails with ConfigErrors only (any other exception escapes and is a finding), each
// error one line.
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

#include "config/config.hpp"

namespace {

namespace config = sandgate::config;
namespace fs = std::filesystem;

void check(bool ok) {
  if (!ok) std::abort();
}

// The main file's name: a scratch directory holding sandboxes.d/ with one drop-in, so the
// default sandboxes_dir is read and merged on every input.
std::string g_main_file;

void remove_scratch() {
  std::error_code ec;
  fs::remove_all(fs::path(g_main_file).parent_path(), ec);
}

void check_loaded(const config::Config& c) {
  check(std::is_sorted(
      c.sandboxes.begin(), c.sandboxes.end(),
      [](const config::Sandbox& a, const config::Sandbox& b) { return a.spec.id < b.spec.id; }));
  for (const config::Sandbox& s : c.sandboxes) {
    check(!s.spec.id.empty());
    check(c.find_sandbox(s.spec.id) == &s);  // ids are unique
  }
  check(c.limits.max_dns_queries_per_sandbox <= config::kMaxDnsQueriesPerSandbox);
  const auto policy = c.build_policy();
  check(policy->sandbox_count() == c.sandboxes.size());
  for (const config::Sandbox& s : c.sandboxes) {
    check(policy->has_sandbox(s.spec.id));
    for (const auto& rule : s.spec.allow) {
      const sandgate::policy::Query q{s.spec.id, rule.pattern.domain,
                                      rule.pattern.port.value_or(443),
                                      sandgate::policy::EntryMode::connect};
      (void)policy->decide(q);
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const char* tmp = std::getenv("TMPDIR");
  std::string dir =
      std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/sandgate-config-fuzz-XXXXXX";
  if (mkdtemp(dir.data()) == nullptr) std::abort();
  fs::create_directory(dir + "/sandboxes.d");
  std::ofstream(dir + "/sandboxes.d/drop-in.toml")
      << "id = \"drop-in\"\nprofile = \"default\"\ntoken = \"t\"\nallow = [\"*.example.com\"]\n";
  g_main_file = dir + "/sandgate.toml";
  std::atexit(remove_scratch);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  try {
    check_loaded(config::load_config_from_string(in, g_main_file));
  } catch (const config::ConfigErrors& e) {
    check(!e.errors().empty());
    for (const config::ConfigError& error : e.errors()) {
      check(error.to_string().find('\n') == std::string::npos);
    }
  }
  return 0;
}
