#include "launcher/outcome.hpp"

#include <signal.h>
#include <string.h>

#include <algorithm>
#include <boost/json.hpp>
#include <map>
#include <set>
#include <vector>

namespace sandgate::launcher {
namespace {

boost::json::value optional_number(const std::optional<std::uint64_t>& v) {
  return v ? boost::json::value(*v) : boost::json::value(nullptr);
}

// `text` for a terminal: printable ASCII only, at most `max` bytes (its right end kept: the
// end of a name says who owns it).
std::string shown(std::string_view text, std::size_t max) {
  std::string out(text);
  for (char& c : out) {
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) > 0x7e) c = '?';
  }
  if (out.size() > max) out = "..." + out.substr(out.size() - (max - 3));
  return out;
}

// One refused destination of the summary.
struct Refused {
  std::string host;
  std::uint16_t port = 0;
  std::uint64_t count = 0;
  std::set<std::string> protocols;
  std::set<std::string> reasons;
  std::string suggestion;
};

}  // namespace

void classify(RunOutcome& o, bool timed_out) {
  if (timed_out) {
    o.error = kSandboxCommandTimeout;
    o.retryable = false;  // the same command under the same deadline: give it more time
    o.status = kTimeoutExit;
    o.message = "the command did not finish within --timeout " +
                std::to_string(o.timeout ? o.timeout->count() : 0) + " ms";
  } else if (o.oom_kills.value_or(0) > 0) {
    o.error = kSandboxOom;
    o.retryable = false;  // the same limit again: give it more memory
    o.message = "the kernel killed " + std::to_string(*o.oom_kills) +
                " process(es) of the sandbox at its --memory limit of " +
                std::to_string(o.memory_bytes.value_or(0)) + " bytes";
  }
}

std::string denial_summary(std::string_view sandbox, const DenialSnapshot& d,
                           std::size_t max_lines) {
  if (d.total == 0 && d.denials.empty()) return {};
  std::map<std::pair<std::string, std::uint16_t>, Refused> by_destination;
  for (const DenialCount& c : d.denials) {
    Refused& r = by_destination[{c.host, c.port}];
    r.host = c.host;
    r.port = c.port;
    r.count += c.count;
    r.protocols.insert(c.protocol);
    r.reasons.insert(c.reason);
    if (r.suggestion.empty()) r.suggestion = c.suggestion;
  }
  std::vector<Refused> list;
  for (auto& [key, r] : by_destination) list.push_back(std::move(r));
  std::stable_sort(list.begin(), list.end(),
                   [](const Refused& a, const Refused& b) { return a.count > b.count; });
  const auto joined = [](const std::set<std::string>& words) {
    std::string out;
    for (const std::string& w : words) out += (out.empty() ? "" : ",") + shown(w, 40);
    return out;
  };
  std::string out = "sandgate-launch: sandbox \"" + shown(sandbox, 64) +
                    "\": the network refused " + std::to_string(list.size()) + " destination" +
                    (list.size() == 1 ? "" : "s") + " (" + std::to_string(d.total) + " time" +
                    (d.total == 1 ? "" : "s") + "):\n";
  // The first line is the heading; the last may be "and N more".
  const std::size_t room = max_lines > 2 ? max_lines - 1 : 1;
  const std::size_t shown_count = list.size() <= room ? list.size() : room - 1;
  for (std::size_t i = 0; i < shown_count; ++i) {
    const Refused& r = list[i];
    out += "  " + shown(r.host, 100);
    if (r.port != 0) out += ":" + std::to_string(r.port);
    out += " (" + joined(r.protocols) + ", " + std::to_string(r.count) + "x): " + joined(r.reasons);
    if (!r.suggestion.empty()) out += "; to allow: " + shown(r.suggestion, 300);
    out += "\n";
  }
  if (shown_count < list.size()) {
    out += "  and " + std::to_string(list.size() - shown_count) + " more";
    if (d.overflow > 0) out += ", and " + std::to_string(d.overflow) + " refusals not itemized";
    out += " (sandgate-launch run --json lists them)\n";
  } else if (d.overflow > 0) {
    out += "  and " + std::to_string(d.overflow) +
           " refusals not itemized (the daemon keeps a bounded number per sandbox)\n";
  }
  return out;
}

std::string outcome_json(const RunOutcome& o) {
  namespace json = boost::json;
  json::object limits{{"timeout_ms", nullptr},
                      {"kill_after_ms", o.kill_after.count()},
                      {"memory_bytes", optional_number(o.memory_bytes)},
                      {"pids", optional_number(o.pids)}};
  if (o.timeout) limits["timeout_ms"] = o.timeout->count();
  json::value denials = nullptr;
  if (o.denials) {
    json::array list;
    for (const DenialCount& d : o.denials->denials) {
      json::object entry{{"host", d.host},     {"port", nullptr},  {"protocol", d.protocol},
                         {"reason", d.reason}, {"count", d.count}, {"suggestion", nullptr}};
      if (d.port != 0) entry["port"] = d.port;
      if (!d.suggestion.empty()) entry["suggestion"] = d.suggestion;
      list.push_back(std::move(entry));
    }
    denials = std::move(list);
  }
  const char* signal_name = o.signal ? ::sigabbrev_np(*o.signal) : nullptr;
  json::object out{
      {"sandbox", o.sandbox},
      {"error", o.error.empty() ? json::value(nullptr) : json::value(o.error)},
      {"message", o.message.empty() ? json::value(nullptr) : json::value(o.message)},
      {"retryable", o.error.empty() ? json::value(nullptr) : json::value(o.retryable)},
      {"status", o.status},
      {"started", o.started},
      {"exit_code", o.exit_code ? json::value(*o.exit_code) : json::value(nullptr)},
      {"signal", o.signal ? json::value(*o.signal) : json::value(nullptr)},
      {"signal_name", signal_name != nullptr ? json::value(std::string("SIG") + signal_name)
                                             : json::value(nullptr)},
      {"duration_ms", o.started ? json::value(o.duration.count()) : json::value(nullptr)},
      {"killed_after_grace", o.killed_after_grace},
      {"limits", std::move(limits)},
      {"oom_kills", optional_number(o.oom_kills)},
      {"pids_limit_hits", optional_number(o.pids_limit_hits)},
      {"denials", std::move(denials)},
      {"denials_total", o.denials ? json::value(o.denials->total) : json::value(nullptr)},
      {"denials_overflow", o.denials ? json::value(o.denials->overflow) : json::value(nullptr)},
      {"denials_error",
       o.denials_error.empty() ? json::value(nullptr) : json::value(o.denials_error)},
  };
  return json::serialize(out) + "\n";
}

}  // namespace sandgate::launcher
