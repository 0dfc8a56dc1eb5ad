#include "launcher/state.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <boost/json.hpp>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace sandgate::launcher {
namespace fs = std::filesystem;
namespace json = boost::json;

std::string SandboxState::netns_path() const {
  return owned_netns ? "/run/netns/" + netns : netns;
}

std::string to_json(const SandboxState& s) {
  json::array cgroups;
  for (const std::string& dir : s.cgroups) cgroups.emplace_back(dir);
  const json::object o{{"id", s.id},
                       {"slot", s.slot},
                       {"host_ip", s.host_ip},
                       {"sandbox_ip", s.sandbox_ip},
                       {"netns", s.netns},
                       {"owned_netns", s.owned_netns},
                       {"host_if", s.host_if},
                       {"table", s.table},
                       {"dropin", s.dropin},
                       {"mode", s.mode},
                       {"pid", s.pid},
                       {"ready", s.ready},
                       {"dns_address", s.dns_address},
                       {"ipv6_all_before", s.ipv6_all_before},
                       {"ipv6_default_before", s.ipv6_default_before},
                       {"lo_down_before", s.lo_down_before},
                       {"cgroups", std::move(cgroups)}};
  return json::serialize(o) + "\n";
}

std::optional<SandboxState> state_from_json(std::string_view text) {
  boost::system::error_code ec;
  const json::value v = json::parse(text, ec);
  if (ec || !v.is_object()) return std::nullopt;
  const json::object& o = v.as_object();
  SandboxState s;
  try {
    s.id = json::value_to<std::string>(o.at("id"));
    s.slot = json::value_to<unsigned>(o.at("slot"));
    s.host_ip = json::value_to<std::string>(o.at("host_ip"));
    s.sandbox_ip = json::value_to<std::string>(o.at("sandbox_ip"));
    s.netns = json::value_to<std::string>(o.at("netns"));
    s.owned_netns = o.at("owned_netns").as_bool();
    s.host_if = json::value_to<std::string>(o.at("host_if"));
    s.table = json::value_to<std::string>(o.at("table"));
    s.dropin = json::value_to<std::string>(o.at("dropin"));
    s.mode = json::value_to<std::string>(o.at("mode"));
    s.pid = json::value_to<long>(o.at("pid"));
    s.ready = o.at("ready").as_bool();
    s.dns_address = json::value_to<std::string>(o.at("dns_address"));
    // Absent in state files of older launchers: nothing to restore.
    if (const auto* field = o.if_contains("ipv6_all_before")) {
      s.ipv6_all_before = json::value_to<std::string>(*field);
    }
    if (const auto* field = o.if_contains("ipv6_default_before")) {
      s.ipv6_default_before = json::value_to<std::string>(*field);
    }
    if (const auto* field = o.if_contains("lo_down_before")) s.lo_down_before = field->as_bool();
    if (const auto* field = o.if_contains("cgroups")) {
      s.cgroups = json::value_to<std::vector<std::string>>(*field);
    }
  } catch (const std::exception&) {
    return std::nullopt;
  }
  return s;
}

void write_file_atomically(const std::string& path, std::string_view content, unsigned mode) {
  const std::string temp = path + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  bool ok = fd >= 0;
  int error = errno;
  if (ok) {
    const ssize_t n = ::write(fd, content.data(), content.size());
    ok = n == static_cast<ssize_t>(content.size()) && ::fsync(fd) == 0;
    error = errno;
    ok = (::close(fd) == 0) && ok;
  }
  if (ok && ::rename(temp.c_str(), path.c_str()) != 0) {
    ok = false;
    error = errno;
  }
  if (!ok) {
    ::unlink(temp.c_str());
    throw std::runtime_error("cannot write " + path + ": " + std::strerror(error));
  }
}

StateDir::StateDir(std::string path) : path_(std::move(path)) {
  std::error_code ec;
  fs::create_directories(fs::path(path_) / "sandboxes", ec);
  if (ec) throw std::runtime_error("cannot create state directory " + path_ + ": " + ec.message());
  // Others may pass through (to <state_dir>/ca, the one public part) but not list it; what is
  // private lives in 0700 subdirectories or 0600 files.
  fs::permissions(path_, fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec, ec);
  fs::permissions(fs::path(path_) / "sandboxes", fs::perms::owner_all, ec);
}

std::string StateDir::file_of(std::string_view id) const {
  return (fs::path(path_) / "sandboxes" / (std::string(id) + ".json")).string();
}

std::vector<SandboxState> StateDir::all() const {
  std::vector<SandboxState> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(fs::path(path_) / "sandboxes", ec)) {
    if (entry.path().extension() != ".json") continue;
    std::ifstream in(entry.path());
    std::stringstream text;
    text << in.rdbuf();
    if (auto state = state_from_json(text.str())) out.push_back(std::move(*state));
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
  return out;
}

std::optional<SandboxState> StateDir::find(std::string_view id) const {
  std::ifstream in(file_of(id));
  if (!in) return std::nullopt;
  std::stringstream text;
  text << in.rdbuf();
  return state_from_json(text.str());
}

void StateDir::write(const SandboxState& state) const {
  write_file_atomically(file_of(state.id), to_json(state), 0600);
}

void StateDir::remove(std::string_view id) const {
  ::unlink(file_of(id).c_str());
}

void StateDir::mark(std::string_view kind, std::string_view name) const {
  const fs::path dir = fs::path(path_) / kind;
  std::error_code ec;
  fs::create_directories(dir, ec);
  fs::permissions(dir, fs::perms::owner_all, ec);
  const std::string path = (dir / name).string();
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) throw std::runtime_error("cannot write " + path + ": " + std::strerror(errno));
  ::close(fd);
}

void StateDir::unmark(std::string_view kind, std::string_view name) const {
  ::unlink((fs::path(path_) / kind / name).c_str());
}

std::vector<std::string> StateDir::marks(std::string_view kind) const {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(fs::path(path_) / kind, ec)) {
    out.push_back(entry.path().filename().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

namespace {

int lock_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0 || ::flock(fd, LOCK_EX) != 0) {
    const int error = errno;
    if (fd >= 0) ::close(fd);
    throw std::runtime_error("cannot lock " + path + ": " + std::strerror(error));
  }
  return fd;
}

}  // namespace

StateLock::StateLock(const StateDir& dir) : fd_(lock_file(dir.path() + "/lock")) {}

StateLock::~StateLock() {
  ::close(fd_);
}

HostLock::HostLock() : fd_(lock_file(kHostLockPath)) {}

HostLock::~HostLock() {
  ::close(fd_);
}

}  // namespace sandgate::launcher
