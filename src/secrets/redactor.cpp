#include "secrets/redactor.hpp"

#include <algorithm>

#include "secrets/secret_bytes.hpp"

namespace sandgate::secrets {

namespace {
std::ptrdiff_t as_offset(std::size_t n) {
  return static_cast<std::ptrdiff_t>(n);
}
}  // namespace

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
  const std::string_view all(held_);
  for (const std::string& needle : needles_) {
    // Occurrences that end in the held bytes were found (and counted) by an earlier call.
    const std::size_t from = old >= needle.size() ? old - needle.size() + 1 : 0;
    for (auto at = all.find(needle, from); at != std::string_view::npos;
         at = all.find(needle, at + 1)) {
      pending_.push_back({at, at + needle.size()});
      ++redactions_;
    }
  }
  // Bytes from here on may begin a needle that the next chunk completes.
  const std::size_t keep = std::min(held_.size(), longest_ - 1);
  const std::size_t release = held_.size() - keep;
  std::string out = held_.substr(0, release);
  std::size_t kept = 0;
  for (const Range& r : pending_) {
    const std::size_t end = std::min(r.end, release);
    if (r.begin < end)
      std::fill(out.begin() + as_offset(r.begin), out.begin() + as_offset(end), kFiller);
    // What reaches into the held bytes stays pending, moved to their new offsets.
    if (r.end > release) pending_[kept++] = {std::max(r.begin, release) - release, r.end - release};
  }
  pending_.resize(kept);
  held_.erase(0, release);
  return out;
}

std::string Redactor::finish() {
  std::string out = std::move(held_);
  for (const Range& r : pending_) {
    std::fill(out.begin() + as_offset(r.begin), out.begin() + as_offset(r.end), kFiller);
  }
  held_.clear();
  pending_.clear();
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
