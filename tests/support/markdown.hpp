#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace sandgate::test {

// One fenced code block of a Markdown file, as the docs tests read them.
struct CodeBlock {
  std::string where;   // "docs/config.md:223", the line of the opening fence
  std::string lang;    // the fence's info string ("toml", "sh"); "" for a bare fence
  std::string marker;  // the text after "example:" of an HTML comment on the line before the
                       // fence (invisible once rendered), trimmed; "" when there is none
  std::string text;    // the lines inside, with the fence's indentation removed
};

std::string trim(std::string s);

// Every fenced block of `file`, indented ones (inside a list item) included; `shown` names the
// file in `where`.
std::vector<CodeBlock> code_blocks(const std::filesystem::path& file, const std::string& shown);

// README.md, then docs/*.md in name order, under `source_dir`.
std::vector<std::filesystem::path> doc_files(const std::filesystem::path& source_dir);

}  // namespace sandgate::test
