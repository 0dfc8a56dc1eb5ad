// read_lines over real files: plain, gzip (one member or several), cut short, with lines
// past the limit and a last line without its newline.
#include "audit/input.hpp"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>
#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace sandgate::audit {
namespace {

namespace fs = std::filesystem;

class Collect final : public LineSink {
 public:
  void line(std::string_view text) override { lines.emplace_back(text); }
  void too_long() override { ++too_long_lines; }
  std::vector<std::string> lines;
  int too_long_lines = 0;
};

class AuditInput : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "sandgate-audit-input-XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string write_plain(const std::string& name, const std::string& text) const {
    const std::string path = (dir_ / name).string();
    std::ofstream(path, std::ios::binary) << text;
    return path;
  }
  // Each element of `members` is a gzip member of its own (as `cat a.gz b.gz` makes).
  std::string write_gzip(const std::string& name, const std::vector<std::string>& members) const {
    const std::string path = (dir_ / name).string();
    std::string bytes;
    for (const std::string& m : members) {
      z_stream z{};
      EXPECT_EQ(deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY), Z_OK);
      std::string out(deflateBound(&z, m.size()) + 64, '\0');
      z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(m.data()));
      z.avail_in = static_cast<uInt>(m.size());
      z.next_out = reinterpret_cast<Bytef*>(out.data());
      z.avail_out = static_cast<uInt>(out.size());
      EXPECT_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
      out.resize(z.total_out);
      deflateEnd(&z);
      bytes += out;
    }
    std::ofstream(path, std::ios::binary) << bytes;
    return path;
  }

  fs::path dir_;
};

TEST_F(AuditInput, ReadsPlainLinesAndALastLineWithoutNewline) {
  Collect sink;
  const auto s = read_lines(write_plain("a.log", "one\ntwo\n\nthree"), 1024, sink);
  EXPECT_EQ(s.error, "");
  EXPECT_FALSE(s.compressed);
  EXPECT_EQ(sink.lines, (std::vector<std::string>{"one", "two", "", "three"}));
  EXPECT_EQ(s.lines, 4u);
  EXPECT_EQ(s.bytes, 14u);
}

TEST_F(AuditInput, ReadsGzipWhateverItsNameAndEveryMember) {
  Collect sink;
  const auto s = read_lines(write_gzip("rotated.1", {"a\nb\n", "c\n"}), 1024, sink);
  EXPECT_EQ(s.error, "");
  EXPECT_TRUE(s.compressed);
  EXPECT_EQ(sink.lines, (std::vector<std::string>{"a", "b", "c"}));
}

TEST_F(AuditInput, SkipsLinesPastTheLimitWithoutKeepingThem) {
  // Lines longer than the limit, one inside a read and one across several reads (more than
  // the 1 MiB buffer), are counted and skipped; the lines around them are whole.
  const std::string big(3 << 20, 'x');
  Collect sink;
  const auto s =
      read_lines(write_plain("long.log", "a\n" + std::string(2000, 'y') + "\nb\n" + big + "\nc\n"),
                 1000, sink);
  EXPECT_EQ(s.error, "");
  EXPECT_EQ(sink.lines, (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(sink.too_long_lines, 2);
  EXPECT_EQ(s.lines, 5u);
}

TEST_F(AuditInput, ATruncatedGzipKeepsWhatCameBefore) {
  std::string lines;
  for (int i = 0; i < 20000; ++i) lines += "line " + std::to_string(i) + "\n";
  const std::string path = write_gzip("cut.gz", {lines});
  fs::resize_file(path, fs::file_size(path) / 2);
  Collect sink;
  const auto s = read_lines(path, 1024, sink);
  EXPECT_NE(s.error, "");
  EXPECT_GT(sink.lines.size(), 100u);
  EXPECT_LT(sink.lines.size(), 20001u);
  EXPECT_EQ(sink.lines[100], "line 100");
}

TEST_F(AuditInput, AMissingFileIsAnError) {
  Collect sink;
  const auto s = read_lines((dir_ / "nope.log").string(), 1024, sink);
  EXPECT_EQ(s.error, "No such file or directory");
  EXPECT_TRUE(sink.lines.empty());
}

}  // namespace
}  // namespace sandgate::audit
