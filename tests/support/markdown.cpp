#include "support/markdown.hpp"

#include <algorithm>
#include <fstream>
#include <string_view>

namespace sandgate::test {

namespace fs = std::filesystem;

std::string trim(std::string s) {
  const auto first = s.find_first_not_of(" \t");
  if (first == std::string::npos) return {};
  s.erase(0, first);
  s.erase(s.find_last_not_of(" \t") + 1);
  return s;
}

std::vector<CodeBlock> code_blocks(const fs::path& file, const std::string& shown) {
  std::ifstream in(file);
  std::vector<CodeBlock> out;
  std::string line;
  std::string previous;
  int number = 0;
  CodeBlock* open = nullptr;
  std::size_t indent = 0;
  while (std::getline(in, line)) {
    ++number;
    const std::string trimmed = trim(line);
    if (open == nullptr) {
      if (trimmed.starts_with("```")) {
        out.push_back({shown + ":" + std::to_string(number), trim(trimmed.substr(3)), {}, {}});
        open = &out.back();
        indent = line.find('`');
        const std::string before = trim(previous);
        constexpr std::string_view kOpen = "<!-- example:";
        if (before.starts_with(kOpen) && before.ends_with("-->")) {
          open->marker = trim(before.substr(kOpen.size(), before.size() - kOpen.size() - 3));
        }
      }
      if (!trimmed.empty()) previous = line;
      continue;
    }
    if (trimmed == "```") {
      open = nullptr;
      previous.clear();
      continue;
    }
    open->text += (line.size() >= indent ? line.substr(indent) : trimmed) + "\n";
  }
  return out;
}

std::vector<fs::path> doc_files(const fs::path& source_dir) {
  std::vector<fs::path> docs;
  for (const auto& entry : fs::directory_iterator(source_dir / "docs")) {
    if (entry.path().extension() == ".md") docs.push_back(entry.path());
  }
  std::sort(docs.begin(), docs.end());
  docs.insert(docs.begin(), source_dir / "README.md");
  return docs;
}

}  // namespace sandgate::test
