// Every TOML example in README.md and docs/*.md loads as the docs present it: the blocks are
// read from the Markdown when the test runs (never copied here), so a doc edit that breaks an
// example fails this test. A block is a whole main config file unless an HTML comment on the
// line before its fence (invisible once rendered) says what it is:
//
//   <!-- example: name N -->             a main config, named N for other blocks
//   <!-- example: after N -->            lines added to the end of example N (a fragment)
//   <!-- example: drop-in after N -->    a file of sandboxes_dir, next to example N
//   <!-- example: skip: WHY -->          not loaded (WHY says why)
//
// Loading is load_config's: syntax, keys, values and cross references. Files the example
// names (keys, CA certificates) are not read: `--check-config` checks those on a real host.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "support/markdown.hpp"
#include "support/temp_dir.hpp"

namespace sandgate::config {
namespace {

namespace fs = std::filesystem;

std::string source_dir() {
  if (const char* dir = std::getenv("SANDGATE_SOURCE_DIR")) return dir;
  return SANDGATE_DEFAULT_SOURCE_DIR;
}

using test::CodeBlock;
using test::trim;

// The ```toml blocks of README.md and docs/*.md.
std::vector<CodeBlock> all_examples() {
  std::vector<CodeBlock> out;
  for (const fs::path& f : test::doc_files(source_dir())) {
    const std::string shown = fs::relative(f, source_dir()).string();
    for (CodeBlock& b : test::code_blocks(f, shown)) {
      if (b.lang == "toml") out.push_back(std::move(b));
    }
  }
  return out;
}

// Loads `main` (and `drop_in` as a file of its sandboxes_dir) from a temporary directory; ""
// when it loads, else every error.
std::string load_errors(const std::string& main, const std::string& drop_in = {}) {
  test::TempDir dir;
  const std::string sandboxes = dir.file("sandboxes.d");
  fs::create_directories(sandboxes);
  if (!drop_in.empty()) {
    std::ofstream(sandboxes + "/example.toml") << drop_in;
  }
  // sandboxes_dir must come before the first table; an example that sets it keeps its own.
  const std::string text = main.find("sandboxes_dir") == std::string::npos
                               ? "sandboxes_dir = \"" + sandboxes + "\"\n" + main
                               : main;
  const std::string path = dir.file("sandgate.toml");
  std::ofstream(path) << text;
  try {
    load_config(path);
  } catch (const ConfigErrors& e) {
    std::string out;
    for (const ConfigError& error : e.errors()) out += "\n  " + error.to_string();
    return out;
  }
  return {};
}

TEST(DocsExamples, EveryTomlBlockLoadsAsItsDocPresentsIt) {
  const std::vector<CodeBlock> examples = all_examples();
  ASSERT_GE(examples.size(), 10u) << "the docs lost their examples, or the reader broke";
  std::map<std::string, std::string> named;  // in any file, before or after its users
  for (const CodeBlock& e : examples) {
    if (e.marker.starts_with("name ")) named[trim(e.marker.substr(5))] = e.text;
  }
  std::size_t checked = 0;
  for (const CodeBlock& e : examples) {
    SCOPED_TRACE(e.where);
    std::string main = e.text;
    std::string drop_in;
    std::string marker = e.marker;
    if (marker.starts_with("skip:")) {
      EXPECT_GT(trim(marker.substr(5)).size(), 3u) << "a skipped example says why";
      continue;
    }
    if (marker.starts_with("name ")) {
      // loaded as it is, below
    } else if (marker.starts_with("after ") || marker.starts_with("drop-in after ")) {
      const bool is_drop_in = marker.starts_with("drop-in");
      const std::string base = trim(marker.substr(marker.find("after ") + 6));
      const auto found = named.find(base);
      ASSERT_NE(found, named.end()) << "no example named " << base;
      main = is_drop_in ? found->second : found->second + "\n" + e.text;
      if (is_drop_in) drop_in = e.text;
    } else {
      EXPECT_EQ(marker, "") << "unknown example marker";
    }
    EXPECT_EQ(load_errors(main, drop_in), "") << "\n" << e.text;
    ++checked;
  }
  EXPECT_GE(checked, 10u);
}

// The harness itself: a block that does not load fails, and markers are read. Control for
// the test above (which would pass vacuously if nothing were loaded).
TEST(DocsExamples, TheReaderFindsBlocksAndMarkersAndLoadingCatchesErrors) {
  test::TempDir dir;
  const std::string md = dir.write("x.md",
                                   "text\n\n<!-- example: name base -->\n```toml\n"
                                   "[profiles.p]\nallow = [\"a.test\"]\n```\n\n"
                                   "1. item\n\n   ```toml\n   [dns]\n   timeout_ms = 5\n   ```\n");
  const auto blocks = test::code_blocks(md, "x.md");
  ASSERT_EQ(blocks.size(), 2u);
  EXPECT_EQ(blocks[0].marker, "name base");
  EXPECT_EQ(blocks[0].lang, "toml");
  EXPECT_EQ(blocks[0].where, "x.md:4");
  EXPECT_EQ(blocks[1].text, "[dns]\ntimeout_ms = 5\n");
  EXPECT_EQ(blocks[1].marker, "");
  EXPECT_EQ(load_errors(blocks[0].text), "");
  EXPECT_NE(load_errors("[profiles.p]\nallow = [\"a.test:0\"]\n"), "");
  EXPECT_NE(load_errors(blocks[0].text, "id = \"x\"\nprofile = \"nope\"\n"), "");
}

}  // namespace
}  // namespace sandgate::config
