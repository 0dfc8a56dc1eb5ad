#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <vector>

namespace sandgate::proxy {

// How many refusals each sandbox met, by (protocol, host, port, reason): what
// `GET /sandboxes/ID/denials` answers, so that `sandgate-launch run --json` can report the
// denials of its run. Counted where a refusal is reported (Session::record_denial,
// Session::record_tunnel, the DNS listener's refuse), next to the denial metric, so every
// SANDBOX_NETWORK_DENIED counts, whether or not its audit line was written (DNS bursts).
//
// Bounded memory: at most limits.keys_per_sandbox distinct keys per sandbox and limits.keys
// in all, hosts cut to kMaxHostBytes; a refusal past a cap still counts in its sandbox's
// `total` and `overflow`. At most limits.sandboxes sandboxes (past that, refusals are counted
// in dropped() only). A reload that no longer defines a sandbox drops its counts (retain), so
// a launcher's new sandbox starts at zero; `epoch` numbers each new life of an id's counts,
// so a reader that subtracts an earlier snapshot knows whether it still applies. Shared by
// every worker (one mutex; only refusals take it).
class DenialCounts {
 public:
  static constexpr std::size_t kMaxHostBytes = 255;
  static constexpr std::size_t kMaxSuggestionBytes = 512;
  struct Limits {
    std::size_t keys_per_sandbox = 256;
    std::size_t keys = 65536;
    std::size_t sandboxes = 16384;
  };
  struct Entry {
    std::string protocol;
    std::string host;
    std::uint16_t port = 0;  // 0: none (a DNS query)
    std::string reason;
    std::uint64_t count = 0;
    // The config line that would allow it (the audit line's labels.suggestion), as the first
    // refusal of this key that had one reported it; "" none. At most kMaxSuggestionBytes.
    std::string suggestion{};
  };
  struct View {
    std::uint64_t epoch = 0;  // 0: nothing counted for this sandbox (yet)
    std::uint64_t total = 0;  // every refusal, the overflow included
    std::uint64_t overflow = 0;
    std::vector<Entry> entries;  // sorted by protocol, host, port, reason
  };

  DenialCounts() = default;
  explicit DenialCounts(Limits limits) : limits_(limits) {}

  // An empty sandbox id (a client no sandbox claims) is not counted.
  // `suggestion`: the refusal's labels.suggestion ("" none), kept per key (the first one).
  void add(std::string_view sandbox, std::string_view protocol, std::string_view host,
           std::uint16_t port, std::string_view reason, std::string_view suggestion = {});
  View view(std::string_view sandbox) const;
  // Drops the counts of every sandbox for which keep(id) is false.
  template <class Keep>
  void retain(Keep keep) {
    const std::lock_guard lock(mutex_);
    for (auto it = by_sandbox_.begin(); it != by_sandbox_.end();) {
      if (keep(it->first)) {
        ++it;
      } else {
        keys_ -= it->second.counts.size();
        it = by_sandbox_.erase(it);
      }
    }
  }
  std::size_t keys() const;
  std::uint64_t dropped() const;

 private:
  using Key = std::tuple<std::string, std::string, std::uint16_t, std::string>;
  struct Sandbox {
    std::uint64_t epoch = 0;
    std::uint64_t total = 0;
    std::uint64_t overflow = 0;
    struct Count {
      std::uint64_t count = 0;
      std::string suggestion{};
    };
    std::map<Key, Count, std::less<>> counts;
  };

  Limits limits_;
  mutable std::mutex mutex_;
  std::unordered_map<std::string, Sandbox> by_sandbox_;
  std::size_t keys_ = 0;
  std::uint64_t next_epoch_ = 1;
  std::uint64_t dropped_ = 0;
};

}  // namespace sandgate::proxy
