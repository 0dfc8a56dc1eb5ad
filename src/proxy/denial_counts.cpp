#include "proxy/denial_counts.hpp"

namespace sandgate::proxy {

void DenialCounts::add(std::string_view sandbox, std::string_view protocol, std::string_view host,
                       std::uint16_t port, std::string_view reason, std::string_view suggestion) {
  if (sandbox.empty()) return;
  const std::lock_guard lock(mutex_);
  auto it = by_sandbox_.find(std::string(sandbox));
  if (it == by_sandbox_.end()) {
    if (by_sandbox_.size() >= limits_.sandboxes) {
      ++dropped_;
      return;
    }
    it = by_sandbox_.emplace(std::string(sandbox), Sandbox{}).first;
    it->second.epoch = next_epoch_++;
  }
  Sandbox& s = it->second;
  ++s.total;
  Key key{std::string(protocol), std::string(host.substr(0, kMaxHostBytes)), port,
          std::string(reason)};
  if (const auto found = s.counts.find(key); found != s.counts.end()) {
    ++found->second.count;
    if (found->second.suggestion.empty() && !suggestion.empty()) {
      found->second.suggestion.assign(suggestion.substr(0, kMaxSuggestionBytes));
    }
    return;
  }
  if (s.counts.size() >= limits_.keys_per_sandbox || keys_ >= limits_.keys) {
    ++s.overflow;
    return;
  }
  s.counts.emplace(std::move(key),
                   Sandbox::Count{1, std::string(suggestion.substr(0, kMaxSuggestionBytes))});
  ++keys_;
}

DenialCounts::View DenialCounts::view(std::string_view sandbox) const {
  const std::lock_guard lock(mutex_);
  View v;
  const auto it = by_sandbox_.find(std::string(sandbox));
  if (it == by_sandbox_.end()) return v;
  v.epoch = it->second.epoch;
  v.total = it->second.total;
  v.overflow = it->second.overflow;
  v.entries.reserve(it->second.counts.size());
  for (const auto& [key, count] : it->second.counts) {
    v.entries.push_back(Entry{std::get<0>(key), std::get<1>(key), std::get<2>(key),
                              std::get<3>(key), count.count, count.suggestion});
  }
  return v;
}

std::size_t DenialCounts::keys() const {
  const std::lock_guard lock(mutex_);
  return keys_;
}

std::uint64_t DenialCounts::dropped() const {
  const std::lock_guard lock(mutex_);
  return dropped_;
}

}  // namespace sandgate::proxy
