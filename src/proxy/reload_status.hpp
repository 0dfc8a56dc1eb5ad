#pragma once

// What the daemon's reloads of its config came to, for GET /sandboxes/ID (docs/launcher.md,
// "When the daemon refuses a sandbox"): a launcher that wrote a drop-in and sees its sandbox
// still inactive learns from it at once that a reload since failed, and why, instead of
// waiting out its ready_timeout. Shared by the main thread (which reloads) and the admin
// listener's workers: one mutex, taken once per reload and per admin request.

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace sandgate::proxy {

class ReloadStatus {
 public:
  // The errors kept of one failed reload, and the bytes kept of each: the same lines as the
  // daemon's stderr, bounded.
  static constexpr std::size_t kMaxErrors = 8;
  static constexpr std::size_t kMaxErrorBytes = 400;

  struct View {
    std::uint64_t started = 0;        // reloads begun since the daemon started
    std::uint64_t finished = 0;       // the number of the last one that finished (0: none yet)
    bool failed = false;              // ... and whether it failed (kept the previous config)
    std::vector<std::string> errors;  // its errors when it failed (at most kMaxErrors)
    std::uint64_t more_errors = 0;    // errors past kMaxErrors
  };

  // Called when a reload begins; returns its number.
  std::uint64_t begin() {
    const std::lock_guard lock(mutex_);
    return ++view_.started;
  }
  // Called when reload number `n` has finished (failed: with its error lines).
  void finish(std::uint64_t n, bool failed, const std::vector<std::string>& errors = {}) {
    const std::lock_guard lock(mutex_);
    if (n < view_.finished) return;
    view_.finished = n;
    view_.failed = failed;
    view_.errors.clear();
    view_.more_errors = 0;
    if (!failed) return;
    for (const std::string& e : errors) {
      if (view_.errors.size() == kMaxErrors) {
        ++view_.more_errors;
        continue;
      }
      view_.errors.push_back(e.size() <= kMaxErrorBytes ? e : e.substr(0, kMaxErrorBytes) + "...");
    }
  }
  View view() const {
    const std::lock_guard lock(mutex_);
    return view_;
  }

 private:
  mutable std::mutex mutex_;
  View view_;
};

}  // namespace sandgate::proxy
