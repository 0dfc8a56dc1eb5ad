#include "launcher/system.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace sandgate::launcher {
namespace {
namespace fs = std::filesystem;

// A scratch directory with an executable `tool`, one non-executable `plain` and a directory
// `dir`, removed at the end.
struct Scratch {
  fs::path root = fs::temp_directory_path() / ("sg-find-tool-" + std::to_string(::getpid()));
  Scratch() {
    fs::create_directories(root / "a");
    fs::create_directories(root / "b" / "dir");
    for (const char* name : {"a/tool", "b/tool", "b/plain", "b/only-b"}) {
      std::ofstream(root / name) << "#!/bin/sh\n";
    }
    ::chmod((root / "a/tool").c_str(), 0755);
    ::chmod((root / "b/tool").c_str(), 0755);
    ::chmod((root / "b/only-b").c_str(), 0755);
    ::chmod((root / "b/plain").c_str(), 0644);
  }
  ~Scratch() { fs::remove_all(root); }
  std::string dir(const char* d) const { return (root / d).string(); }
};

TEST(LauncherSystem, FindToolLooksOnlyInTheGivenDirectoriesInOrder) {
  const Scratch s;
  const std::vector<std::string> dirs = {s.dir("a"), s.dir("b")};
  struct Row {
    const char* name;
    std::optional<std::string> found;
  };
  const Row rows[] = {
      {"tool", s.dir("a") + "/tool"},      // the first directory wins
      {"only-b", s.dir("b") + "/only-b"},  // later directories are searched
      {"plain", std::nullopt},             // not executable
      {"dir", std::nullopt},               // a directory is no tool
      {"missing", std::nullopt},
      {"", std::nullopt},
      {"b/tool", std::nullopt},  // a name with a slash is never resolved
      {"../b/tool", std::nullopt},
  };
  for (const Row& row : rows) {
    EXPECT_EQ(find_tool(row.name, dirs), row.found) << row.name;
  }
}

// The command (not a tool) is looked up as execvp would, in the PATH it is given.
TEST(LauncherSystem, FindCommandFollowsThePathItIsGiven) {
  const Scratch s;
  const std::string path = s.dir("b") + ":" + s.dir("a");
  EXPECT_EQ(find_command("tool", path), s.dir("b") + "/tool");
  EXPECT_EQ(find_command("only-b", path), s.dir("b") + "/only-b");
  EXPECT_EQ(find_command("plain", path), std::nullopt);
  EXPECT_EQ(find_command("dir", path), std::nullopt);
  EXPECT_EQ(find_command("missing", path), std::nullopt);
  EXPECT_EQ(find_command("", path), std::nullopt);
  EXPECT_EQ(find_command(s.dir("a") + "/tool", std::string()), s.dir("a") + "/tool");
  EXPECT_EQ(find_command(s.dir("b") + "/plain", path), std::nullopt);
  EXPECT_EQ(find_command("sh", std::nullopt), "/bin/sh");  // execvp's default path
}

TEST(LauncherSystem, ToolsComeFromTheFixedListWhateverPathSays) {
  const Scratch s;
  const char* old = std::getenv("PATH");
  const std::string saved = old != nullptr ? old : "";
  ::setenv("PATH", (s.dir("a") + ":" + s.dir("b")).c_str(), 1);
  // "tool" is in $PATH only: not found. "sh" is found in the fixed list, not via $PATH.
  EXPECT_EQ(find_tool("tool"), std::nullopt);
  const auto sh = find_tool("sh");
  ASSERT_TRUE(sh.has_value());
  EXPECT_TRUE(sh->starts_with("/usr/sbin/") || sh->starts_with("/usr/bin/") ||
              sh->starts_with("/sbin/") || sh->starts_with("/bin/"))
      << *sh;
  EXPECT_EQ(tool_path("tool"), "tool");
  // run_tool does not run a.tool from $PATH either.
  EXPECT_EQ(run_tool({"tool"}).status, 127);
  EXPECT_EQ(run_tool({"sh", "-c", "exit 3"}).status, 3);
  ::setenv("PATH", saved.c_str(), 1);
}

}  // namespace
}  // namespace sandgate::launcher
