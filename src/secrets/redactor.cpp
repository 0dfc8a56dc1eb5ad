#include "secrets/redactor.hpp"

#include <algorithm>

#include "secrets/secret_bytes.hpp"

namespace sandgate::secrets {

Redactor::Redactor(std::vector<std::string> needles) {
  for (std::string& needle : needles) {
    if (needle.empty()) continue;
    longest_ = std::max(longest_, needle.size());
    needles_.push_back(std::move(needle));
  }
}

std::string Redactor::feed(std::string_view chunk) {
  if (needles_.empty()) return std::string(chunk);
  const std::size_t old = held_.size();
  held_.append(chunk);
  mask_.resize(held_.size(), false);
  const std::string_view all(held_);
  for (const std::string& needle : needles_) {
    // Occurrences that end in the held bytes were found (and counted) by an earlier call.
    std::size_t from = old >= needle.size() ? old - needle.size() + 1 : 0;
    for (auto at = all.find(needle, from); at != std::string_view::npos;
         at = all.find(needle, at + 1)) {
      std::fill(mask_.begin() + static_cast<std::ptrdiff_t>(at),
                mask_.begin() + static_cast<std::ptrdiff_t>(at + needle.size()), true);
      ++redactions_;
    }
  }
  // Bytes from here on may begin a needle that the next chunk completes.
  const std::size_t keep = std::min(held_.size(), longest_ - 1);
  const std::size_t release = held_.size() - keep;
  std::string out = held_.substr(0, release);
  for (std::size_t i = 0; i < release; ++i) {
    if (mask_[i]) out[i] = kFiller;
  }
  held_.erase(0, release);
  mask_.erase(mask_.begin(), mask_.begin() + static_cast<std::ptrdiff_t>(release));
  return out;
}

std::string Redactor::finish() {
  std::string out = std::move(held_);
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (mask_[i]) out[i] = kFiller;
  }
  held_.clear();
  mask_.clear();
  return out;
}

std::string Redactor::redact(std::string_view value) {
  std::string out(value);
  for (const std::string& needle : needles_) {
    for (auto at = value.find(needle); at != std::string_view::npos;
         at = value.find(needle, at + 1)) {
      std::fill_n(out.begin() + static_cast<std::ptrdiff_t>(at), needle.size(), kFiller);
      ++redactions_;
    }
  }
  return out;
}

Redactor::~Redactor() {
  for (std::string& needle : needles_) cleanse(needle);
}

}  // namespace sandgate::secrets
