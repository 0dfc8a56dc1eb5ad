// Every shell transcript in README.md and docs/*.md runs as the docs print it: the blocks are
// read from the Markdown when the test runs (never copied here), so a doc change that breaks
// an example, or a code change that makes one lie, fails this test.
//
// A transcript is a fenced block whose first line starts with "$ ": each "$ " line is a
// command, the lines up to the next one are what it prints (stdout and stderr together). A
// last line "..." stands for whatever follows. Every ```sh block is a command list a reader
// types; it must be written as a transcript or skipped with a reason. An HTML comment on the
// line before the fence (invisible once rendered) says how a block runs:
//
//   <!-- example: in DIR -->      run in DIR, relative to the source tree (default: its root)
//   <!-- example: skip: WHY -->   not run (WHY says why, e.g. which test covers it instead)
//
// The transcripts of one file run in order in one shell, as a reader would type them, with
// `sandgate` and `sandgate-launch` the binaries under test. They run in a mount namespace of
// their own in which /etc is an overlay whose writes land in a temporary directory, so that
// `sandgate ca init /etc/sandgate/ca` runs as written and leaves nothing on the machine. What
// differs from run to run (a CA's random name, dates, fingerprints) is masked on both sides.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include "support/markdown.hpp"
#include "support/subprocess.hpp"
#include "support/temp_dir.hpp"

namespace sandgate::test {
namespace {

namespace fs = std::filesystem;

fs::path source_dir() {
  if (const char* dir = std::getenv("SANDGATE_SOURCE_DIR")) return dir;
  return SANDGATE_DEFAULT_SOURCE_DIR;
}

fs::path sandgate_bin() {
  if (const char* bin = std::getenv("SANDGATE_BIN")) return bin;
  return SANDGATE_DEFAULT_BIN;
}

struct Step {
  std::string where;  // the block's position
  std::string dir;    // working directory, relative to the source tree
  std::string command;
  std::vector<std::string> expected;  // "..." as the last line: any further lines
};

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::size_t at = 0;
  while (at < text.size()) {
    const std::size_t end = text.find('\n', at);
    out.push_back(text.substr(at, end - at));
    if (end == std::string::npos) break;
    at = end + 1;
  }
  return out;
}

bool is_transcript(const CodeBlock& b) {
  return (b.lang.empty() || b.lang == "sh" || b.lang == "console") && b.text.starts_with("$ ");
}

// The steps of one file's transcripts, in order. A shell block that is neither a transcript nor
// skipped is a failure of its own (reported through `unchecked`).
std::vector<Step> transcript_steps(const std::vector<CodeBlock>& blocks,
                                   std::vector<std::string>& unchecked, int& skipped) {
  std::vector<Step> steps;
  for (const CodeBlock& b : blocks) {
    if (b.marker.starts_with("skip:")) {
      EXPECT_GT(trim(b.marker.substr(5)).size(), 3u) << b.where << ": a skipped example says why";
      if (is_transcript(b) || b.lang == "sh") ++skipped;
      continue;
    }
    if (!is_transcript(b)) {
      if (b.lang == "sh") unchecked.push_back(b.where);
      continue;
    }
    std::string dir;
    if (b.marker.starts_with("in ")) {
      dir = trim(b.marker.substr(3));
    } else {
      EXPECT_EQ(b.marker, "") << b.where << ": unknown example marker";
    }
    for (const std::string& line : lines_of(b.text)) {
      if (line.starts_with("$ ")) {
        steps.push_back({b.where, dir, line.substr(2), {}});
      } else {
        steps.back().expected.push_back(line);
      }
    }
  }
  return steps;
}

// Masks what differs between runs: a CA's random name, dates, fingerprints.
std::string masked(std::string line) {
  static const std::regex kFingerprint("([0-9A-F]{2}:){31}[0-9A-F]{2}");
  static const std::regex kTime("[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2} UTC");
  static const std::regex kHex("\\b[0-9a-f]{8,}\\b");
  line = std::regex_replace(line, kFingerprint, "<fingerprint>");
  line = std::regex_replace(line, kTime, "<time>");
  return std::regex_replace(line, kHex, "<hex>");
}

std::string single_quoted(const std::string& s) {
  std::string out = "'";
  for (const char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// Runs the steps in one shell (in its own mount namespace, /etc overlaid) and returns what
// each printed.
std::vector<std::string> run_steps(const std::vector<Step>& steps, TempDir& scratch) {
  const std::string out_dir = scratch.file("out");
  fs::create_directories(out_dir);
  fs::create_directories(scratch.file("etc-upper"));
  fs::create_directories(scratch.file("etc-work"));
  std::string script =
      "export PATH=" +
      single_quoted(sandgate_bin().parent_path().string() + ":" + SANDGATE_DEFAULT_LAUNCH_DIR) +
      ":\"$PATH\"\n__s=0\n";
  for (std::size_t i = 0; i < steps.size(); ++i) {
    // `( exit $__s )` gives the command the status of the one before, for `echo $?`; the
    // braces take a trailing comment, the redirection the whole command.
    script += "cd " + single_quoted((source_dir() / steps[i].dir).string()) + " || exit 99\n";
    script += "( exit \"$__s\" ); {\n" + steps[i].command + "\n} >" + out_dir + "/" +
              std::to_string(i) + " 2>&1 </dev/null; __s=$?\n";
  }
  std::ofstream(scratch.file("script.sh")) << script;
  const std::string mount =
      "mount -t overlay overlay -o lowerdir=/etc,upperdir=" + scratch.file("etc-upper") +
      ",workdir=" + scratch.file("etc-work") + " /etc && exec bash " + scratch.file("script.sh");
  const CommandResult r =
      run_command({"unshare", "--mount", "--propagation", "private", "sh", "-c", mount},
                  std::chrono::seconds(120));
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  std::vector<std::string> printed;
  for (std::size_t i = 0; i < steps.size(); ++i) {
    std::ifstream in(out_dir + "/" + std::to_string(i));
    printed.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  return printed;
}

// "" when `printed` is what `expected` says (masked), else the first difference.
std::string difference(const std::vector<std::string>& expected, const std::string& printed) {
  std::vector<std::string> got = lines_of(printed);
  if (!got.empty() && got.back().empty()) got.pop_back();
  const bool open_end = !expected.empty() && expected.back() == "...";
  const std::size_t want = open_end ? expected.size() - 1 : expected.size();
  for (std::size_t i = 0; i < want; ++i) {
    if (i >= got.size()) return "missing line " + std::to_string(i + 1) + ": " + expected[i];
    if (masked(got[i]) != masked(expected[i])) {
      return "line " + std::to_string(i + 1) + "\n  docs: " + expected[i] + "\n  real: " + got[i];
    }
  }
  if (!open_end && got.size() > want) return "extra line: " + got[want];
  return {};
}

TEST(DocsCommands, EveryTranscriptPrintsWhatTheDocsSay) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root (a mount namespace with /etc overlaid)";
  std::size_t ran = 0;
  int skipped = 0;
  for (const fs::path& f : doc_files(source_dir())) {
    const std::string shown = fs::relative(f, source_dir()).string();
    std::vector<std::string> unchecked;
    const std::vector<Step> steps = transcript_steps(code_blocks(f, shown), unchecked, skipped);
    for (const std::string& where : unchecked) {
      ADD_FAILURE() << where << ": a ```sh block is written as a transcript (\"$ \" lines and "
                    << "what they print) or marked <!-- example: skip: WHY -->";
    }
    if (steps.empty()) continue;
    TempDir scratch;
    const std::vector<std::string> printed = run_steps(steps, scratch);
    for (std::size_t i = 0; i < steps.size(); ++i) {
      EXPECT_EQ(difference(steps[i].expected, printed[i]), "")
          << steps[i].where << ": $ " << steps[i].command;
    }
    ran += steps.size();
  }
  EXPECT_GE(ran, 25u) << "the docs lost their transcripts, or the reader broke";
  EXPECT_LE(skipped, 12) << "most examples run; a new skip needs a look";
}

// The runner itself: a wrong line fails, "..." ends a comparison early, masks apply to both
// sides, `echo $?` sees the status of the command before, and a step's directory is used.
// Control for the test above, which would pass vacuously if nothing ran.
TEST(DocsCommands, TheRunnerComparesLinesStatusesAndDirectories) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root (a mount namespace with /etc overlaid)";
  TempDir md_dir;
  const std::string md = md_dir.write(
      "x.md",
      "<!-- example: in tests -->\n```\n$ basename \"$PWD\"\ntests\n$ false\n$ echo $?\n1\n```\n"
      "```sh\n$ printf 'a\\nb\\n'\na\n...\n$ echo ca 0123abcd >&2\nca 89abcdef\n"
      "$ touch /etc/sandgate-docs-test && echo made\nmade\n```\n"
      "<!-- example: skip: not for this test -->\n```sh\nexit 1\n```\n");
  std::vector<std::string> unchecked;
  int skipped = 0;
  const std::vector<Step> steps = transcript_steps(code_blocks(md, "x.md"), unchecked, skipped);
  EXPECT_TRUE(unchecked.empty());
  EXPECT_EQ(skipped, 1);
  ASSERT_EQ(steps.size(), 6u);
  EXPECT_EQ(steps[0].dir, "tests");
  TempDir scratch;
  const std::vector<std::string> printed = run_steps(steps, scratch);
  for (std::size_t i = 0; i < steps.size(); ++i) {
    EXPECT_EQ(difference(steps[i].expected, printed[i]), "") << steps[i].command;
  }
  EXPECT_FALSE(fs::exists("/etc/sandgate-docs-test")) << "the overlay kept /etc as it was";
  EXPECT_NE(difference({"tests"}, "test\n"), "");
  EXPECT_NE(difference({"a"}, "a\nb\n"), "");
  EXPECT_NE(difference({"a", "b"}, "a\n"), "");
  std::vector<std::string> none;
  transcript_steps(code_blocks(md_dir.write("y.md", "```sh\nls\n```\n"), "y.md"), none, skipped);
  EXPECT_EQ(none, std::vector<std::string>{"y.md:1"}) << "an unmarked command block is reported";
}

}  // namespace
}  // namespace sandgate::test
