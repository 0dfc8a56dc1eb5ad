#include "audit/report.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <set>
#include <tuple>
#include <utility>

#include "common/ascii.hpp"
#include "common/errc.hpp"
#include "policy/host.hpp"
#include "policy/policy.hpp"

namespace sandgate::audit {

namespace {

constexpr std::string_view kDenied = "SANDBOX_NETWORK_DENIED";
constexpr std::size_t kBitmapBits = 1U << 16;
constexpr std::size_t kMaxProtocols = 8;

bool is_connection(std::string_view code) {
  return code == "connection_closed" || code == "http_request";
}

// "example.com" matches itself; "*.example.com" any name below it, not the apex.
bool host_matches(std::string_view pattern, std::string_view host) {
  if (host.ends_with('.')) host.remove_suffix(1);
  if (pattern.starts_with("*.")) {
    const std::string_view suffix = pattern.substr(1);  // ".example.com"
    return host.size() > suffix.size() &&
           iequals_ascii(host.substr(host.size() - suffix.size()), suffix);
  }
  return iequals_ascii(pattern, host);
}

template <class List>
bool contains(const List& list, std::string_view value) {
  return std::find(list.begin(), list.end(), value) != list.end();
}

}  // namespace

// Appends raw bytes; on passing kInline the key moves to long_ whole.
void GroupKey::append(std::string_view part) {
  if (part.empty()) return;  // an absent field: a null view, which memcpy may not take
  const std::size_t size = size_ + part.size();
  if (size <= kInline) {
    std::memcpy(inline_ + size_, part.data(), part.size());
  } else {
    if (size_ <= kInline) long_.assign(inline_, size_);
    long_.append(part);
  }
  size_ = static_cast<std::uint32_t>(size);
}

namespace {

// Appends a field to a composite key, length first, so no two field lists share a key.
void key_part(GroupKey& key, std::string_view part) {
  const auto n = static_cast<std::uint32_t>(part.size());
  key.append(std::string_view(reinterpret_cast<const char*>(&n), sizeof n));
  key.append(part);
}

void key_port(GroupKey& key, std::uint16_t port) {
  const std::array<char, 2> bytes{static_cast<char>(port >> 8U), static_cast<char>(port & 0xFFU)};
  key.append(std::string_view(bytes.data(), bytes.size()));
}

std::int64_t floor_div(std::int64_t a, std::int64_t b) {
  return a / b - ((a % b != 0) && ((a < 0) != (b < 0)) ? 1 : 0);
}

void widen(std::int64_t t, std::int64_t& first, std::int64_t& last, bool fresh) {
  if (fresh || t < first) first = t;
  if (fresh || t > last) last = t;
}

std::optional<policy::Reason> reason_from_name(std::string_view name) {
  for (int i = 0; i <= static_cast<int>(policy::kLastReason); ++i) {
    const auto r = static_cast<policy::Reason>(i);
    if (policy::reason_name(r) == name) return r;
  }
  return std::nullopt;
}

// destination.address writes an IPv6 literal in brackets; normalize_host takes it bare.
policy::Host host_of(std::string_view text) {
  if (text.size() > 2 && text.front() == '[' && text.back() == ']') {
    text = text.substr(1, text.size() - 2);
  }
  return policy::normalize_host(text);
}

}  // namespace

std::string_view source_name(SuggestionSource s) {
  switch (s) {
    case SuggestionSource::none:
      return "none";
    case SuggestionSource::log:
      return "log";
    case SuggestionSource::config:
      return "config";
    case SuggestionSource::derived:
      return "derived";
  }
  return "none";
}

std::string_view side_of_code(std::string_view code) {
  if (code == kDenied) return "policy";
  for (int i = 1; i <= static_cast<int>(Errc::internal_error); ++i) {
    const auto e = static_cast<Errc>(i);
    if (code_name(e) != code) continue;
    switch (side_of(e)) {
      case Side::client:
        return "client";
      case Side::upstream:
        return "upstream";
      case Side::internal:
        return "internal";
    }
  }
  return "unknown";
}

bool Filter::accepts(const AuditEvent& e) const {
  if (since_ms && e.time_ms < *since_ms) return false;
  if (until_ms && e.time_ms >= *until_ms) return false;
  if (denied_only && e.code != kDenied) return false;
  if (!codes.empty() && !contains(codes, e.code)) return false;
  if (!sandboxes.empty() && !contains(sandboxes, e.sandbox)) return false;
  if (!hosts.empty() && std::none_of(hosts.begin(), hosts.end(), [&](const std::string& p) {
        return host_matches(p, e.host);
      })) {
    return false;
  }
  return true;
}

void Aggregator::Bitmap::add(std::string_view key) {
  if (bits.empty()) bits.assign(kBitmapBits / 64, 0);
  const std::size_t h = std::hash<std::string_view>{}(key) % kBitmapBits;
  bits[h / 64] |= std::uint64_t{1} << (h % 64);
}

std::uint64_t Aggregator::Bitmap::estimate() const {
  if (bits.empty()) return 0;
  std::size_t set = 0;
  for (const std::uint64_t word : bits) set += static_cast<std::size_t>(__builtin_popcountll(word));
  const double m = kBitmapBits;
  const double zeros = m - static_cast<double>(set);
  if (zeros < 1) return static_cast<std::uint64_t>(m * std::log(m));  // saturated: at least
  return static_cast<std::uint64_t>(std::llround(-m * std::log(zeros / m)));
}

bool Aggregator::Table::has_room(std::size_t size, std::string_view key) {
  if (size < limit) return true;
  ++overflow.lines;
  seen.add(key);
  return false;
}

Aggregator::Aggregator(Filter filter, Limits limits, Placer placer)
    : filter_(std::move(filter)), limits_(limits), placer_(std::move(placer)) {
  if (limits_.max_time_buckets < 2) limits_.max_time_buckets = 2;
  for (Table* t :
       {&denial_table_, &destination_table_, &error_table_, &credential_table_, &sandbox_table_}) {
    t->limit = limits_.max_groups;
  }
}

void Aggregator::add(const AuditEvent& e) {
  ++lines_;
  if (!filter_.accepts(e)) return;
  widen(e.time_ms, first_ms_, last_ms_, matched_ == 0);
  ++matched_;
  const bool denied = e.code == kDenied;
  const bool connection = is_connection(e.code);
  const bool error = !denied && !connection;

  key_.clear();
  key_.append(e.sandbox);
  auto sandbox = sandboxes_.find(key_);
  if (sandbox == sandboxes_.end() && sandbox_table_.has_room(sandboxes_.size(), e.sandbox)) {
    sandbox = sandboxes_.emplace(key_, SandboxState{}).first;
    SandboxSummary& s = sandbox->second.summary;
    s.sandbox = e.sandbox;
    s.first_ms = s.last_ms = e.time_ms;
  }
  if (sandbox != sandboxes_.end()) {
    SandboxSummary& s = sandbox->second.summary;
    ++s.lines;
    s.connections += connection ? 1 : 0;
    s.denied += denied ? 1 : 0;
    s.errors += error ? 1 : 0;
    s.suppressed += e.suppressed;
    s.bytes_up += e.bytes_up;
    s.bytes_down += e.bytes_down;
    widen(e.time_ms, s.first_ms, s.last_ms, false);
    if (denied) add_series(sandbox->second, e.time_ms);
  }

  if (!e.host.empty()) {
    key_.clear();
    key_part(key_, e.host);
    key_port(key_, e.port);
    auto it = destinations_.find(key_);
    if (it == destinations_.end() &&
        destination_table_.has_room(destinations_.size(), key_.view())) {
      it = destinations_.emplace(key_, DestinationGroup{}).first;
      it->second.host = e.host;
      it->second.port = e.port;
    }
    if (it != destinations_.end()) {
      DestinationGroup& d = it->second;
      d.connections += connection ? 1 : 0;
      d.denied += denied ? 1 : 0;
      d.errors += error ? 1 : 0;
      d.bytes_up += e.bytes_up;
      d.bytes_down += e.bytes_down;
    }
  }

  if (denied || error) {
    key_.clear();
    key_part(key_, e.sandbox);
    key_part(key_, e.code);
    auto it = errors_.find(key_);
    if (it == errors_.end() && error_table_.has_room(errors_.size(), key_.view())) {
      it = errors_.emplace(key_, ErrorGroup{}).first;
      it->second.sandbox = e.sandbox;
      it->second.code = e.code;
      it->second.side = side_of_code(e.code);
      it->second.first_ms = it->second.last_ms = e.time_ms;
    }
    if (it != errors_.end()) {
      ++it->second.count;
      widen(e.time_ms, it->second.first_ms, it->second.last_ms, false);
    }
  }
  if (denied) add_denial(e);

  if (!e.credential_name.empty() || !e.credential_fingerprint.empty()) {
    key_.clear();
    key_part(key_, e.host);
    key_part(key_, e.credential_name);
    key_part(key_, e.credential_fingerprint);
    auto it = credentials_.find(key_);
    if (it == credentials_.end() && credential_table_.has_room(credentials_.size(), key_.view())) {
      it = credentials_.emplace(key_, CredentialGroup{}).first;
      it->second.host = e.host;
      it->second.name = e.credential_name;
      it->second.fingerprint = e.credential_fingerprint;
      it->second.first_ms = it->second.last_ms = e.time_ms;
    }
    if (it != credentials_.end()) {
      ++it->second.count;
      widen(e.time_ms, it->second.first_ms, it->second.last_ms, false);
    }
  }
}

void Aggregator::add_denial(const AuditEvent& e) {
  key_.clear();
  key_part(key_, e.sandbox);
  key_part(key_, e.host);
  key_port(key_, e.port);
  key_part(key_, e.reason);
  auto it = denials_.find(key_);
  if (it == denials_.end()) {
    if (!denial_table_.has_room(denials_.size(), key_.view())) return;
    it = denials_.emplace(key_, DenialGroup{}).first;
    DenialGroup& g = it->second;
    g.sandbox = e.sandbox;
    g.host = e.host;
    g.port = e.port;
    g.reason = e.reason;
    g.rule = e.rule;
    g.first_ms = g.last_ms = e.time_ms;
    if (e.suggestion.empty()) std::tie(g.suggestion, g.suggestion_source) = derive_suggestion(e);
  }
  DenialGroup& g = it->second;
  ++g.count;
  widen(e.time_ms, g.first_ms, g.last_ms, false);
  // The daemon's own suggestion (made with the config in force then) beats a derived one.
  if (!e.suggestion.empty() && g.suggestion_source != SuggestionSource::log) {
    g.suggestion = e.suggestion;
    g.suggestion_source = SuggestionSource::log;
  }
  if (!e.protocol.empty() && g.protocols.size() < kMaxProtocols &&
      !contains(g.protocols, e.protocol)) {
    g.protocols.emplace_back(e.protocol);
  }
}

std::pair<std::string, SuggestionSource> Aggregator::derive_suggestion(const AuditEvent& e) const {
  const std::pair<std::string, SuggestionSource> none{std::string(), SuggestionSource::none};
  if (e.sandbox.empty()) return none;
  const auto reason = reason_from_name(e.reason);
  if (!reason) return none;
  policy::Decision d;
  d.reason = *reason;
  d.rule = e.rule;
  policy::Host host = host_of(e.host);
  // An address reason about a name: the address it resolved to, when the line has it.
  if (host.is_name() && !e.destination_ip.empty() &&
      (*reason == policy::Reason::special_address || *reason == policy::Reason::host_address)) {
    host = host_of(e.destination_ip);
  }
  // A DNS line names no port: its suggestion opens the name on the sandbox's ports.
  const std::optional<std::uint16_t> port =
      e.protocol == "dns" ? std::nullopt : std::optional<std::uint16_t>(e.port);
  policy::SandboxHome home;
  home.id = e.sandbox;
  if (placer_) home = placer_(e.sandbox);
  const policy::EntryMode mode =
      e.protocol == "tcp" ? policy::EntryMode::tcp : policy::EntryMode::http;
  const policy::Suggestion s = policy::suggest(home, host, port, d, mode);
  if (!s) return none;
  return {s.text(), placer_ ? SuggestionSource::config : SuggestionSource::derived};
}

void Aggregator::add_series(SandboxState& sandbox, std::int64_t t) {
  std::int64_t bucket = floor_div(t, width_ms_);
  if (!min_bucket_ || bucket < *min_bucket_) min_bucket_ = bucket;
  if (!max_bucket_ || bucket > *max_bucket_) max_bucket_ = bucket;
  const auto span = [&] { return static_cast<std::size_t>(*max_bucket_ - *min_bucket_ + 1); };
  while (span() > limits_.max_time_buckets) {
    width_ms_ *= 2;
    for (auto& [name, state] : sandboxes_) {
      if (state.series.empty()) continue;
      const std::int64_t base = floor_div(state.series_base, 2);
      std::vector<std::uint64_t> merged(state.series.size() / 2 + 2, 0);
      for (std::size_t i = 0; i < state.series.size(); ++i) {
        const std::int64_t index = state.series_base + static_cast<std::int64_t>(i);
        merged[static_cast<std::size_t>(floor_div(index, 2) - base)] += state.series[i];
      }
      while (!merged.empty() && merged.back() == 0) merged.pop_back();
      state.series_base = base;
      state.series.swap(merged);
    }
    min_bucket_ = floor_div(*min_bucket_, 2);
    max_bucket_ = floor_div(*max_bucket_, 2);
    bucket = floor_div(t, width_ms_);
  }
  std::vector<std::uint64_t>& counts = sandbox.series;
  if (counts.empty()) {
    sandbox.series_base = bucket;
  } else if (bucket < sandbox.series_base) {
    counts.insert(counts.begin(), static_cast<std::size_t>(sandbox.series_base - bucket), 0);
    sandbox.series_base = bucket;
  }
  const auto at = static_cast<std::size_t>(bucket - sandbox.series_base);
  if (at >= counts.size()) counts.resize(at + 1, 0);
  ++counts[at];
}

Report Aggregator::take_report(std::size_t top) {
  Report r;
  r.top = top;
  r.max_groups = limits_.max_groups;
  r.lines = lines_;
  r.matched = matched_;
  r.malformed = malformed_;
  r.too_long = too_long_;
  r.first_ms = first_ms_;
  r.last_ms = last_ms_;
  for (auto& [key, s] : sandboxes_) r.sandboxes.push_back(std::move(s.summary));
  std::sort(r.sandboxes.begin(), r.sandboxes.end(),
            [](const auto& a, const auto& b) { return a.sandbox < b.sandbox; });

  for (auto& [key, g] : denials_) r.denials.push_back(std::move(g));
  denials_.clear();
  std::sort(r.denials.begin(), r.denials.end(), [](const DenialGroup& a, const DenialGroup& b) {
    if (a.sandbox != b.sandbox) return a.sandbox < b.sandbox;
    if (a.count != b.count) return a.count > b.count;
    if (a.host != b.host) return a.host < b.host;
    if (a.port != b.port) return a.port < b.port;
    return a.reason < b.reason;
  });
  r.suggestions = merge_suggestions(r.denials);

  std::vector<DestinationGroup> destinations;
  destinations.reserve(destinations_.size());
  for (auto& [key, d] : destinations_) destinations.push_back(std::move(d));
  destinations_.clear();
  r.destinations = destinations.size();
  const auto take_top = [&](auto measure) {
    std::vector<DestinationGroup> out = destinations;
    const auto order = [&](const DestinationGroup& a, const DestinationGroup& b) {
      if (measure(a) != measure(b)) return measure(a) > measure(b);
      if (a.host != b.host) return a.host < b.host;
      return a.port < b.port;
    };
    const std::size_t n = std::min(top, out.size());
    std::partial_sort(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(n), out.end(), order);
    out.resize(n);
    std::erase_if(out, [&](const DestinationGroup& d) { return measure(d) == 0; });
    return out;
  };
  r.top_by_bytes = take_top([](const DestinationGroup& d) { return d.bytes(); });
  r.top_by_connections = take_top([](const DestinationGroup& d) { return d.connections; });

  for (auto& [key, e] : errors_) r.errors.push_back(std::move(e));
  std::sort(r.errors.begin(), r.errors.end(), [](const ErrorGroup& a, const ErrorGroup& b) {
    if (a.side != b.side) return a.side < b.side;
    if (a.code != b.code) return a.code < b.code;
    return a.sandbox < b.sandbox;
  });
  for (auto& [key, c] : credentials_) r.credentials.push_back(std::move(c));
  std::sort(r.credentials.begin(), r.credentials.end(),
            [](const CredentialGroup& a, const CredentialGroup& b) {
              if (a.host != b.host) return a.host < b.host;
              if (a.name != b.name) return a.name < b.name;
              return a.fingerprint < b.fingerprint;
            });

  if (min_bucket_) {
    r.series_width_ms = width_ms_;
    r.series_start_ms = *min_bucket_ * width_ms_;
    const auto buckets = static_cast<std::size_t>(*max_bucket_ - *min_bucket_ + 1);
    for (const auto& [name, state] : sandboxes_) {
      if (state.series.empty()) continue;
      DenialSeries s;
      s.sandbox = name.view();
      s.counts.assign(buckets, 0);
      for (std::size_t i = 0; i < state.series.size(); ++i) {
        const std::int64_t index = state.series_base + static_cast<std::int64_t>(i);
        s.counts[static_cast<std::size_t>(index - *min_bucket_)] += state.series[i];
      }
      r.series.push_back(std::move(s));
    }
    const auto total = [](const DenialSeries& s) {
      std::uint64_t n = 0;
      for (const std::uint64_t c : s.counts) n += c;
      return n;
    };
    std::sort(r.series.begin(), r.series.end(), [&](const DenialSeries& a, const DenialSeries& b) {
      if (total(a) != total(b)) return total(a) > total(b);
      return a.sandbox < b.sandbox;
    });
    if (r.series.size() > top) r.series.resize(top);
  }

  const auto overflow = [](const Table& t) {
    Overflow o = t.overflow;
    o.groups = std::max<std::uint64_t>(t.seen.estimate(), o.lines > 0 ? 1 : 0);
    o.groups = std::min(o.groups, o.lines);
    return o;
  };
  r.denial_overflow = overflow(denial_table_);
  r.destination_overflow = overflow(destination_table_);
  r.error_overflow = overflow(error_table_);
  r.credential_overflow = overflow(credential_table_);
  r.sandbox_overflow = overflow(sandbox_table_);
  return r;
}

}  // namespace sandgate::audit
