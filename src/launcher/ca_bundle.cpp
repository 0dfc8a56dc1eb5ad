#include "launcher/ca_bundle.hpp"

#include <algorithm>
#include <cctype>
#include <set>

namespace sandgate::launcher {
namespace {

constexpr std::string_view kBegin = "-----BEGIN CERTIFICATE-----";
constexpr std::string_view kEnd = "-----END CERTIFICATE-----";

// A block's identity: its base64 body without whitespace.
std::string body_of(std::string_view block) {
  std::string body;
  for (const char c : block.substr(kBegin.size(), block.size() - kBegin.size() - kEnd.size())) {
    if (std::isspace(static_cast<unsigned char>(c)) == 0) body += c;
  }
  return body;
}

}  // namespace

std::vector<std::string_view> certificate_blocks(std::string_view pem) {
  std::vector<std::string_view> blocks;
  std::size_t at = 0;
  while ((at = pem.find(kBegin, at)) != std::string_view::npos) {
    const std::size_t end = pem.find(kEnd, at + kBegin.size());
    if (end == std::string_view::npos) break;
    // A BEGIN before this END starts the block again: the earlier one was never closed.
    const std::size_t restart = pem.rfind(kBegin, end);
    blocks.push_back(pem.substr(restart, end + kEnd.size() - restart));
    at = end + kEnd.size();
  }
  return blocks;
}

std::string make_ca_bundle(std::string_view system_roots, const std::vector<std::string>& extras) {
  std::string bundle(system_roots);
  std::set<std::string> present;
  for (const std::string_view block : certificate_blocks(system_roots)) {
    present.insert(body_of(block));
  }
  for (const std::string& extra : extras) {
    for (const std::string_view block : certificate_blocks(extra)) {
      if (!present.insert(body_of(block)).second) continue;
      if (!bundle.empty() && bundle.back() != '\n') bundle += '\n';
      bundle += block;
      bundle += '\n';
    }
  }
  return bundle;
}

}  // namespace sandgate::launcher
