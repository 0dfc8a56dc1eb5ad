#include "launcher/admin_client.hpp"

#include <boost/json.hpp>
#include <map>
#include <tuple>

#include "http/client/plain_exchange.hpp"

namespace sandgate::launcher {
namespace {

constexpr std::size_t kMaxBody = 1024 * 1024;  // the denials of a sandbox are bounded

http::PlainAnswer get(const std::string& host, std::uint16_t port, const std::string& target,
                      std::chrono::milliseconds timeout) {
  http::PlainRequest request;
  request.target = target;
  return http::plain_exchange(host, port, std::move(request), timeout, kMaxBody);
}

// The `reload` object of GET /sandboxes/ID, when there is one that reads.
void read_reload(const boost::json::object& body, SandboxStatus& status) {
  const boost::json::value* reload = body.if_contains("reload");
  if (reload == nullptr || !reload->is_object()) return;
  try {
    const boost::json::object& r = reload->as_object();
    status.reloads_started = boost::json::value_to<std::uint64_t>(r.at("started"));
    status.reload_finished = boost::json::value_to<std::uint64_t>(r.at("finished"));
    status.reload_failed = r.at("failed").as_bool();
    for (const boost::json::value& e : r.at("errors").as_array()) {
      status.reload_errors.emplace_back(e.as_string());
    }
    if (const auto* more = r.if_contains("more_errors")) {
      status.reload_more_errors = boost::json::value_to<std::uint64_t>(*more);
    }
    status.reload_known = true;
  } catch (const std::exception&) {
    status.reload_errors.clear();  // not one this launcher reads: as if there were none
  }
}

}  // namespace

SandboxStatus query_sandbox(const std::string& host, std::uint16_t port, std::string_view id,
                            std::chrono::milliseconds timeout) {
  const std::string target = "/sandboxes/" + std::string(id);
  const http::PlainAnswer answer = get(host, port, target, timeout);
  SandboxStatus status;
  if (answer.status == 0) {
    status.detail = answer.error;
    return status;
  }
  boost::system::error_code ec;
  const auto body = boost::json::parse(answer.body, ec);
  const boost::json::object* object = !ec ? body.if_object() : nullptr;
  if (object != nullptr) read_reload(*object, status);
  if (answer.status == 404) {
    status.answer = SandboxStatus::Answer::inactive;
    return status;
  }
  if (answer.status == 200 && object != nullptr) {
    const auto* active = object->if_contains("active");
    if (active != nullptr && active->is_bool()) {
      status.answer =
          active->as_bool() ? SandboxStatus::Answer::active : SandboxStatus::Answer::inactive;
      return status;
    }
  }
  status.detail = "unexpected answer " + std::to_string(answer.status) + " to GET " + target;
  return status;
}

std::optional<DenialSnapshot> parse_denials(std::string_view body, std::string* error) {
  boost::system::error_code ec;
  const boost::json::value doc = boost::json::parse(body, ec);
  auto fail = [&](const std::string& why) -> std::optional<DenialSnapshot> {
    if (error != nullptr) *error = why;
    return std::nullopt;
  };
  if (ec || !doc.is_object()) return fail("the denials answer is not a JSON object");
  const boost::json::object& o = doc.as_object();
  DenialSnapshot s;
  try {
    s.epoch = boost::json::value_to<std::uint64_t>(o.at("epoch"));
    s.total = boost::json::value_to<std::uint64_t>(o.at("total"));
    s.overflow = boost::json::value_to<std::uint64_t>(o.at("overflow"));
    for (const boost::json::value& v : o.at("denials").as_array()) {
      const boost::json::object& d = v.as_object();
      DenialCount c;
      c.protocol = boost::json::value_to<std::string>(d.at("protocol"));
      c.host = boost::json::value_to<std::string>(d.at("host"));
      c.port = d.at("port").is_null() ? 0 : boost::json::value_to<std::uint16_t>(d.at("port"));
      c.reason = boost::json::value_to<std::string>(d.at("reason"));
      c.count = boost::json::value_to<std::uint64_t>(d.at("count"));
      if (const auto* suggestion = d.if_contains("suggestion");
          suggestion != nullptr && suggestion->is_string()) {
        c.suggestion = suggestion->as_string();
      }
      s.denials.push_back(std::move(c));
    }
  } catch (const std::exception& e) {
    return fail(std::string("the denials answer lacks a field: ") + e.what());
  }
  return s;
}

DenialSnapshot denials_between(const DenialSnapshot& start, const DenialSnapshot& end) {
  if (start.epoch != end.epoch) return end;
  using Key = std::tuple<std::string, std::string, std::uint16_t, std::string>;
  std::map<Key, std::uint64_t> before;
  for (const DenialCount& c : start.denials)
    before[{c.protocol, c.host, c.port, c.reason}] = c.count;
  DenialSnapshot out;
  out.epoch = end.epoch;
  out.total = end.total >= start.total ? end.total - start.total : end.total;
  out.overflow = end.overflow >= start.overflow ? end.overflow - start.overflow : end.overflow;
  for (const DenialCount& c : end.denials) {
    const auto it = before.find({c.protocol, c.host, c.port, c.reason});
    const std::uint64_t was = it == before.end() ? 0 : it->second;
    if (c.count <= was) continue;
    DenialCount grown = c;
    grown.count = c.count - was;
    out.denials.push_back(std::move(grown));
  }
  return out;
}

std::optional<DenialSnapshot> query_denials(const std::string& host, std::uint16_t port,
                                            std::string_view id, std::chrono::milliseconds timeout,
                                            std::string* error) {
  const std::string target = "/sandboxes/" + std::string(id) + "/denials";
  const http::PlainAnswer answer = get(host, port, target, timeout);
  if (answer.status != 200) {
    if (error != nullptr) {
      *error = answer.status == 0
                   ? "the daemon's admin listener did not answer (" + answer.error + ")"
                   : "the daemon answered " + std::to_string(answer.status) + " to GET " + target;
    }
    return std::nullopt;
  }
  return parse_denials(answer.body, error);
}

}  // namespace sandgate::launcher
