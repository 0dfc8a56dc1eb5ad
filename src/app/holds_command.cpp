#include "app/holds_command.hpp"

#include <algorithm>
#include <boost/json.hpp>
#include <chrono>
#include <iostream>
#include <optional>
#include <stdexcept>

#include "http/client/event_stream.hpp"
#include "http/client/plain_exchange.hpp"
#include "secrets/secret_file.hpp"

namespace sandgate::app {

namespace {

constexpr auto kTimeout = std::chrono::seconds(5);
// The daemon writes a keep-alive every 15 s: a stream silent for three is broken.
constexpr auto kWatchIdle = std::chrono::seconds(45);

int print_holds(const std::string& body, bool as_json) {
  if (as_json) {
    std::cout << body;
    return 0;
  }
  boost::system::error_code ec;
  const boost::json::value parsed = boost::json::parse(body, ec);
  const boost::json::value* holds =
      !ec && parsed.is_object() ? parsed.as_object().if_contains("holds") : nullptr;
  if (holds == nullptr || !holds->is_array()) {
    std::cerr << "sandgate holds: the daemon's answer is not a list of holds\n";
    return 1;
  }
  if (holds->as_array().empty()) {
    std::cout << "no destination is held\n";
    return 0;
  }
  const auto now = std::chrono::duration_cast<std::chrono::milliseconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count();
  std::cout << "ID\tSANDBOX\tDESTINATION\tMODE\tREQUEST\tWAITING\tFOR\n";
  for (const boost::json::value& v : holds->as_array()) {
    const boost::json::object& h = v.as_object();
    const auto text = [&](std::string_view key) {
      const boost::json::value* f = h.if_contains(key);
      return f != nullptr && f->is_string() ? std::string(f->as_string()) : std::string();
    };
    const auto number = [&](std::string_view key) {
      const boost::json::value* f = h.if_contains(key);
      return f != nullptr && f->is_int64() ? f->as_int64() : 0;
    };
    const std::string request = text("method").empty() ? "-" : text("method") + " " + text("path");
    std::cout << number("id") << '\t' << text("sandbox") << '\t' << text("host") << ':'
              << number("port") << '\t' << text("mode") << '\t' << request << '\t'
              << number("waiting") << '\t' << (now - number("since_ms")) / 1000 << "s\n";
  }
  return 0;
}

// One write call with the token of listeners.admin_token_file; the exit code, having said
// what went wrong. `what` names the call in messages ("hold 3").
int write_call(const config::Config& cfg, const AdminAddress& admin, http::PlainRequest request,
               const std::string& what, std::string* body) {
  if (cfg.listeners.admin_token_file.empty()) {
    std::cerr << "sandgate holds: answering needs listeners.admin_token_file\n";
    return 2;
  }
  const secrets::AdminToken token = secrets::read_admin_token(cfg.listeners.admin_token_file);
  if (!token.file.ok()) {
    std::cerr << "sandgate holds: " << token.file.error << "\n";
    return 1;
  }
  request.fields.emplace_back("Authorization", "Bearer " + std::string(token.value()));
  if (!request.body.empty()) request.fields.emplace_back("Content-Type", "application/json");
  const http::PlainAnswer answer =
      http::plain_exchange(admin.host, admin.port, std::move(request), kTimeout);
  if (answer.status == 200) {
    *body = answer.body;
    return 0;
  }
  std::cerr << "sandgate holds: " << what << ": "
            << (answer.status == 0 ? answer.error
                                   : std::to_string(answer.status) + " " + answer.body);
  if (answer.status == 0 || answer.body.empty() || answer.body.back() != '\n') std::cerr << "\n";
  return 1;
}

int revoke(const config::Config& cfg, const AdminAddress& admin,
           const std::vector<std::string>& args) {
  if (args.size() < 2 || args.size() > 3) {
    std::cerr << "sandgate holds: expected \"revoke SANDBOX [HOST:PORT]\"\n";
    return 2;
  }
  http::PlainRequest request;
  request.method = "DELETE";
  request.target = "/sandboxes/" + args[1] + "/grants";
  if (args.size() == 3) request.target += "/" + args[2];
  std::string body;
  const int code = write_call(cfg, admin, std::move(request), "sandbox " + args[1], &body);
  if (code != 0) return code;
  boost::system::error_code ec;
  const boost::json::value parsed = boost::json::parse(body, ec);
  const boost::json::value* n =
      !ec && parsed.is_object() ? parsed.as_object().if_contains("revoked") : nullptr;
  std::cout << "sandbox " << args[1] << ": "
            << (n != nullptr && n->is_number() ? std::to_string(n->to_number<std::uint64_t>())
                                               : std::string("?"))
            << " grant(s) revoked\n";
  return 0;
}

// One line for an event of GET /holds/events: tab-separated (held: id, sandbox, destination,
// mode, request; answered: id, sandbox, destination, outcome), or its data as JSON with the
// event's name added.
std::string watch_line(const http::ServerEvent& e, bool as_json) {
  boost::system::error_code ec;
  boost::json::value parsed = boost::json::parse(e.data, ec);
  if (ec || !parsed.is_object()) return {};
  boost::json::object& o = parsed.as_object();
  if (as_json) {
    boost::json::object line{{"event", e.event}};
    for (const auto& [key, value] : o) line[key] = value;
    return boost::json::serialize(line);
  }
  const auto text = [&](std::string_view key) {
    const boost::json::value* f = o.if_contains(key);
    return f != nullptr && f->is_string() ? std::string(f->as_string()) : std::string();
  };
  const auto number = [&](std::string_view key) {
    const boost::json::value* f = o.if_contains(key);
    return f != nullptr && f->is_int64() ? std::to_string(f->as_int64()) : std::string("?");
  };
  std::string line = e.event + "\t" + number("id") + "\t" + text("sandbox") + "\t" + text("host") +
                     ":" + number("port") + "\t";
  if (e.event == "answered") return line + text("outcome");
  return line + text("mode") + "\t" +
         (text("method").empty() ? "-" : text("method") + " " + text("path"));
}

// `holds watch [--sandbox ID] [--json]`: one line per event until the daemon ends the stream
// (exit 0) or it breaks (1); SIGINT ends it as usual.
int watch_holds(const AdminAddress& admin, const std::vector<std::string>& args) {
  std::string query;
  bool as_json = false;
  for (std::size_t i = 1; i < args.size(); ++i) {
    if (args[i] == "--json") {
      as_json = true;
    } else if (args[i] == "--sandbox" && i + 1 < args.size() && query.empty()) {
      query = "?sandbox=" + args[++i];
    } else {
      std::cerr << "sandgate holds watch: unexpected argument \"" << args[i] << "\"\n";
      return 2;
    }
  }
  http::PlainRequest request;
  request.target = "/holds/events" + query;
  http::EventStreamReader reader;
  http::PlainStream stream;
  const http::PlainAnswer ended = stream.run(
      admin.host, admin.port, request, kTimeout, kWatchIdle, [&](std::string_view bytes) {
        for (const http::ServerEvent& e : reader.feed(bytes)) {
          if (const std::string line = watch_line(e, as_json); !line.empty()) {
            std::cout << line << std::endl;  // at once, for a reader at the other end of a pipe
          }
        }
      });
  if (ended.status == 200 && ended.error.empty()) return 0;
  std::cerr << "sandgate holds watch: " << admin.host << ":" << admin.port << ": "
            << (ended.status != 200 && ended.status != 0
                    ? "status " + std::to_string(ended.status) + " " + ended.body
                    : ended.error)
            << "\n";
  return 1;
}

}  // namespace

std::optional<AdminAddress> admin_address(const config::Config& cfg, const std::string& given,
                                          std::string* error) {
  if (!given.empty()) {
    const std::size_t colon = given.rfind(':');
    try {
      if (colon == std::string::npos) throw std::invalid_argument("no port");
      return AdminAddress{given.substr(0, colon),
                          static_cast<std::uint16_t>(std::stoul(given.substr(colon + 1)))};
    } catch (const std::exception&) {
      *error = "--admin takes ADDRESS:PORT";
      return std::nullopt;
    }
  }
  if (!cfg.listeners.admin) {
    *error = "the config has no admin listener (listeners.admin)";
    return std::nullopt;
  }
  return AdminAddress{cfg.listeners.admin->dial_host(), cfg.listeners.admin->port};
}

int run_holds(const config::Config& cfg, std::vector<std::string> args) {
  std::string given;
  if (const auto it = std::find(args.begin(), args.end(), "--admin");
      it != args.end() && it + 1 != args.end()) {
    given = *(it + 1);
    args.erase(it, it + 2);
  }
  std::string error;
  const std::optional<AdminAddress> found = admin_address(cfg, given, &error);
  if (!found) {
    std::cerr << "sandgate holds: " << error << "\n";
    return 2;
  }
  const AdminAddress& admin = *found;
  if (!args.empty() && args[0] == "watch") return watch_holds(admin, args);
  if (args.empty() || args[0] == "--json") {
    if (args.size() > 1) {
      std::cerr << "sandgate holds: unexpected argument \"" << args[1] << "\"\n";
      return 2;
    }
    http::PlainRequest list;
    list.target = "/holds";
    const http::PlainAnswer answer = http::plain_exchange(admin.host, admin.port, list, kTimeout);
    if (answer.status != 200) {
      std::cerr << "sandgate holds: " << admin.host << ":" << admin.port << ": "
                << (answer.status == 0 ? answer.error : "status " + std::to_string(answer.status))
                << "\n";
      return 1;
    }
    return print_holds(answer.body, !args.empty());
  }
  const std::string& verb = args[0];
  if (verb == "revoke") return revoke(cfg, admin, args);
  if ((verb != "allow" && verb != "deny") || args.size() < 2) {
    std::cerr << "sandgate holds: expected \"allow ID\", \"deny ID\" or \"revoke SANDBOX\"\n";
    return 2;
  }
  boost::json::object body;
  body["action"] = verb == "deny" ? "deny" : "allow_once";
  for (std::size_t i = 2; i < args.size(); ++i) {
    if (verb == "allow" && args[i] == "--sandbox-wide") {
      body["action"] = "allow_sandbox";
    } else if (verb == "allow" && args[i] == "--ttl" && i + 1 < args.size()) {
      try {
        body["ttl_s"] = std::stoll(args[++i]);
      } catch (const std::exception&) {
        std::cerr << "sandgate holds: --ttl takes seconds\n";
        return 2;
      }
    } else if (verb == "deny" && args[i] == "--message" && i + 1 < args.size()) {
      body["message"] = args[++i];
    } else {
      std::cerr << "sandgate holds: unexpected argument \"" << args[i] << "\"\n";
      return 2;
    }
  }
  http::PlainRequest request;
  request.method = "POST";
  request.target = "/holds/" + args[1];
  request.body = boost::json::serialize(body);
  std::string answered;
  const int code = write_call(cfg, admin, std::move(request), "hold " + args[1], &answered);
  if (code == 0) std::cout << "hold " << args[1] << ": " << body["action"].as_string() << "\n";
  return code;
}

}  // namespace sandgate::app
