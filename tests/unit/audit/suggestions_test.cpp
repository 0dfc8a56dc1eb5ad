#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "audit/report.hpp"

namespace sandgate::audit {
namespace {

DenialGroup group(std::string sandbox, std::string suggestion, std::uint64_t count = 1) {
  DenialGroup g;
  g.sandbox = std::move(sandbox);
  g.suggestion = std::move(suggestion);
  g.count = count;
  return g;
}

struct MergeRow {
  const char* name;
  std::vector<DenialGroup> groups;
  std::vector<SuggestionBlock> want;
};

bool same(const SuggestionBlock& a, const SuggestionBlock& b) {
  return a.target == b.target && a.kind == b.kind && a.lines == b.lines &&
         a.sandboxes == b.sandboxes && a.denials == b.denials && a.blocks == b.blocks;
}

std::string show(const SuggestionBlock& b) {
  std::string out = b.kind + " " + b.target + " {";
  for (const auto& l : b.lines) out += l + "; ";
  for (const auto& l : b.blocks) out += "block " + l + "; ";
  out += "} for";
  for (const auto& s : b.sandboxes) out += " " + s;
  return out + " (" + std::to_string(b.denials) + ")";
}

TEST(AuditSuggestions, MergesLinesPerTarget) {
  const std::vector<MergeRow> rows = {
      {"one table, two allow lines merged",
       {group("sb1", R"([sandboxes.sb1] allow = ["a.example:443"])", 3),
        group("sb1", R"([sandboxes.sb1] allow = ["b.example:8443"])", 2)},
       {{"[sandboxes.sb1]",
         "table",
         {R"(allow = ["a.example:443", "b.example:8443"])"},
         {"sb1"},
         5,
         {}}}},
      {"a profile for two sandboxes, keys kept apart, duplicates once",
       {group("l1", R"([profiles.dev] allow = ["a.example:443"])"),
        group("l2", R"([profiles.dev] allow = ["a.example:443"])"),
        group("l2", R"([profiles.dev] allow_cidrs = ["10.0.0.5/32"])")},
       {{"[profiles.dev]",
         "table",
         {R"(allow = ["a.example:443"])", R"(allow_cidrs = ["10.0.0.5/32"])"},
         {"l1", "l2"},
         3,
         {}}}},
      {"the launcher's flag",
       {group("l3", R"(sandgate-launch --allow "a.example:443")"),
        group("l4", R"(sandgate-launch --allow "b.example:443")")},
       {{"sandgate-launch",
         "launcher",
         {R"(sandgate-launch --allow "a.example:443" --allow "b.example:443")"},
         {"l3", "l4"},
         2,
         {}}}},
      {"a profile the launcher has no flag for",
       {group(
           "l5",
           R"([profiles.NAME] allow_cidrs = ["192.0.2.1/32"] (sandgate-launch --profile NAME))")},
       {{"[profiles.NAME]",
         "table",
         {R"(allow_cidrs = ["192.0.2.1/32"])", "# then run with sandgate-launch --profile NAME"},
         {"l5"},
         1,
         {}}}},
      {"a hand-written drop-in",
       {group("ci", R"(/etc/sandgate/sandboxes.d/ci.toml: allow = ["a.example:443"])"),
        group("ci", R"(/etc/sandgate/sandboxes.d/ci.toml: opaque = ["ssh.example:443"])")},
       {{"/etc/sandgate/sandboxes.d/ci.toml",
         "file",
         {R"(allow = ["a.example:443"])", R"(opaque = ["ssh.example:443"])"},
         {"ci"},
         2,
         {}}}},
      {"array-of-tables blocks go whole, after the table's lines, duplicates once",
       {group("sb", "[sandboxes.sb] allow = [\"a.example:443\"]"),
        group("sb",
              "[[sandboxes.sb.http_rules]]\nhosts = [\"a.example\"]\nmethods = "
              "[\"POST\"]\npaths = [\"/y\"]\naction = \"allow\""),
        group("sb", "[[sandboxes.sb.git]]\nrepos = [\"a.example/o/r\"]\nallow = [\"push\"]"),
        group("sb", "[[sandboxes.sb.git]]\nrepos = [\"a.example/o/r\"]\nallow = [\"push\"]")},
       {{"[sandboxes.sb]",
         "table",
         {R"(allow = ["a.example:443"])"},
         {"sb"},
         4,
         {"[[sandboxes.sb.http_rules]]\nhosts = [\"a.example\"]\nmethods = [\"POST\"]\npaths = "
          "[\"/y\"]\naction = \"allow\"",
          "[[sandboxes.sb.git]]\nrepos = [\"a.example/o/r\"]\nallow = [\"push\"]"}}}},
      {"a block for a hand-written drop-in",
       {group("ci", "/d/ci.toml: [[git]]\nrepos = [\"a.example/o/r\"]\nallow = [\"fetch\"]")},
       {{"/d/ci.toml",
         "file",
         {},
         {"ci"},
         1,
         {"[[git]]\nrepos = [\"a.example/o/r\"]\nallow = [\"fetch\"]"}}}},
      {"a quoted bracket or comma is not structure",
       {group("sb", R"([sandboxes.sb] allow = ["a],\"b"])")},
       {{"[sandboxes.sb]", "table", {R"(allow = ["a],\"b"])"}, {"sb"}, 1, {}}}},
      {"an unknown shape is kept verbatim",
       {group("sb", "something else entirely")},
       {{"", "other", {"something else entirely"}, {"sb"}, 1, {}}}},
      {"no suggestion, no block", {group("sb", "")}, {}},
  };
  for (const MergeRow& row : rows) {
    const std::vector<SuggestionBlock> got = merge_suggestions(row.groups);
    ASSERT_EQ(got.size(), row.want.size()) << row.name;
    for (std::size_t i = 0; i < got.size(); ++i) {
      EXPECT_TRUE(same(got[i], row.want[i]))
          << row.name << "\n got: " << show(got[i]) << "\nwant: " << show(row.want[i]);
    }
  }
}

}  // namespace
}  // namespace sandgate::audit
