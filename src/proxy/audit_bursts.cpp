#include "proxy/audit_bursts.hpp"

namespace sandgate::proxy {

AuditBursts::Admit AuditBursts::admit(std::string_view sandbox, std::string_view code,
                                      Clock::time_point now, std::uint64_t lines_per_window) {
  std::lock_guard lock(mutex_);
  auto [it, opened] = windows_.try_emplace(Key{std::string(sandbox), std::string(code)});
  Window& w = it->second;
  if (!opened && now < w.ends) {
    if (w.written < lines_per_window) {
      ++w.written;
      return {true, 0};
    }
    ++w.suppressed;
    return {};
  }
  Admit out{true, opened ? 0 : w.suppressed};
  w = Window{now + kWindow, 1, 0};
  return out;
}

std::vector<AuditBursts::Summary> AuditBursts::take_ended(Clock::time_point now) {
  std::vector<Summary> out;
  std::lock_guard lock(mutex_);
  for (auto it = windows_.begin(); it != windows_.end();) {
    if (now < it->second.ends) {
      ++it;
      continue;
    }
    if (it->second.suppressed != 0) {
      out.push_back({it->first.first, it->first.second, it->second.suppressed});
    }
    it = windows_.erase(it);
  }
  return out;
}

}  // namespace sandgate::proxy
