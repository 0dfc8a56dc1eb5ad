#include "launcher/outcome.hpp"

#include <signal.h>
#include <string.h>

#include <boost/json.hpp>

namespace sandgate::launcher {
namespace {

boost::json::value optional_number(const std::optional<std::uint64_t>& v) {
  return v ? boost::json::value(*v) : boost::json::value(nullptr);
}

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
      json::object entry{{"host", d.host},
                         {"port", nullptr},
                         {"protocol", d.protocol},
                         {"reason", d.reason},
                         {"count", d.count}};
      if (d.port != 0) entry["port"] = d.port;
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
