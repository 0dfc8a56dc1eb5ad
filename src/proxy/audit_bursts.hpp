#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace sandgate::proxy {

// Collapses a burst of one kind of audit line from one sandbox (a sandbox over its DNS query
// budget sends thousands of queries a second, or asks for thousands of denied names) into its
// first lines and one summary line: the first event of a (sandbox, code) opens a window of
// kWindow and is written, and so are the next ones up to the caller's `lines_per_window`; the
// rest until the window ends are counted, not written. When the window ends (found by the
// next event, or by the periodic take_ended() sweep) the count is handed back once to be
// written as the summary. Pure apart from the mutex: the caller passes the time. Shared by
// every worker.
class AuditBursts {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr std::chrono::seconds kWindow{5};

  // What to do with one event.
  struct Admit {
    bool write = false;  // write its line (the first of a burst)
    // Lines left out of the window that just ended, to summarise before this line; 0: none.
    std::uint64_t ended_suppressed = 0;
  };
  Admit admit(std::string_view sandbox, std::string_view code, Clock::time_point now,
              std::uint64_t lines_per_window = 1);

  // A window that ended with lines left out of it.
  struct Summary {
    std::string sandbox;
    std::string code;
    std::uint64_t suppressed = 0;
  };
  // Removes every window that ended by `now`; returns those that left lines out.
  std::vector<Summary> take_ended(Clock::time_point now);

 private:
  struct Window {
    Clock::time_point ends;
    std::uint64_t written = 0;
    std::uint64_t suppressed = 0;
  };
  using Key = std::pair<std::string, std::string>;

  std::mutex mutex_;
  // Bounded by sandboxes x codes: every window ends within kWindow and is swept.
  std::map<Key, Window, std::less<>> windows_;
};

}  // namespace sandgate::proxy
