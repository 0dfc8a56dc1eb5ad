#include "launcher/sandbox.hpp"

#include <linux/capability.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>
#include <thread>

#include "launcher/admin_client.hpp"
#include "launcher/ca_bundle.hpp"
#include "launcher/cgroup.hpp"
#include "launcher/dropin.hpp"
#include "launcher/layout.hpp"
#include "launcher/ruleset.hpp"
#include "launcher/system.hpp"
#include "policy/host_pattern.hpp"

namespace sandgate::launcher {
namespace fs = std::filesystem;
namespace {

constexpr auto kPollInterval = std::chrono::milliseconds(50);

// Undo actions for the steps done so far, run newest first unless commit() is called.
class Rollback {
 public:
  Rollback() = default;
  Rollback(const Rollback&) = delete;
  Rollback& operator=(const Rollback&) = delete;
  ~Rollback() {
    for (auto it = undo_.rbegin(); it != undo_.rend(); ++it) (*it)();
  }
  void add(std::function<void()> undo) { undo_.push_back(std::move(undo)); }
  void commit() { undo_.clear(); }

 private:
  std::vector<std::function<void()>> undo_;
};

// Runs a tool; on failure throws "<what> failed: <tool stderr>; <hint>".
void run_or_throw(const std::vector<std::string>& argv, std::string_view input,
                  const std::string& what) {
  const ToolResult result = run_tool(argv, input);
  if (result.ok()) return;
  std::string message = what + " failed: " + argv[0] + ": " +
                        (result.err.empty() ? "exit " + std::to_string(result.status) : result.err);
  if (result.err.find("File exists") != std::string::npos) {
    message += "; run `sandgate-launch gc` to remove what a crashed launcher left";
  }
  throw LaunchError(1, message);
}

std::string read_whole(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Reads a certificate file the bundle adds; `key` names it in the error (exit 2: the config).
std::string read_certificates(const std::string& path, const std::string& key,
                              const Settings& settings) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw LaunchError(
        2, key + " " + path + " cannot be read; fix the path in " + settings.config_path);
  }
  std::string text = read_whole(path);
  if (certificate_blocks(text).empty()) {
    throw LaunchError(2, key + " " + path +
                             " holds no PEM certificate (-----BEGIN CERTIFICATE-----); "
                             "fix the path in " +
                             settings.config_path);
  }
  return text;
}

void check_request(const Settings& settings, const SandboxRequest& request) {
  if (!valid_sandbox_id(request.id)) {
    throw LaunchError(2,
                      "invalid sandbox id \"" + request.id + "\": " + std::string(kSandboxIdRule));
  }
  if (request.profile && !settings.profiles.contains(*request.profile)) {
    std::string known;
    for (const auto& name : settings.profiles) known += (known.empty() ? "" : ", ") + name;
    throw LaunchError(2, "unknown profile \"" + *request.profile + "\"; profiles in " +
                             settings.config_path + ": " + (known.empty() ? "none" : known));
  }
  for (const std::string& pattern : request.allow) {
    std::string error;
    if (!policy::parse_host_pattern(pattern, &error)) {
      throw LaunchError(2, "invalid --allow pattern \"" + pattern + "\": " + error);
    }
  }
  if (!request.netns_path.empty() && !fs::exists(request.netns_path)) {
    throw LaunchError(2, "--netns " + request.netns_path +
                             " does not exist; pass a namespace file such as /proc/PID/ns/net");
  }
}

void check_daemon(const Settings& settings, const std::string& id) {
  const SandboxStatus status =
      query_sandbox(settings.admin_host, settings.admin_port, id, std::chrono::seconds(3));
  if (status.answer == SandboxStatus::Answer::unreachable) {
    throw LaunchError(1, "no sandgate daemon answers on its admin listener " + settings.admin_host +
                             ":" + std::to_string(settings.admin_port) + " (" + status.detail +
                             "); start sandgate --config " + settings.config_path + " first");
  }
}

// Under the state lock (and the caller's HostLock): refuses an id in use, takes the lowest slot
// that neither this state directory nor anything on the host uses (another config's sandboxes
// included) and writes the state file (ready=false) before anything else exists, so gc can
// always find what this run creates.
SandboxState claim(const StateDir& dir, const Settings& settings, const SandboxRequest& request) {
  const StateLock lock(dir);
  const std::string name = netns_name(request.id);
  const std::string dropin = settings.sandboxes_dir + "/" + request.id + ".toml";
  std::string user;
  if (dir.find(request.id)) {
    user = "the launcher has it (state file " + dir.file_of(request.id) + ")";
  } else if (settings.defined_ids.contains(request.id)) {
    user = "it is defined in " + settings.config_path + " or its sandboxes_dir";
  } else if (fs::exists(dropin)) {
    user = "drop-in " + dropin + " exists";
  } else if (request.netns_path.empty() && fs::exists("/run/netns/" + name)) {
    user = "network namespace " + name + " exists";
  }
  if (!user.empty()) {
    throw LaunchError(1, "sandbox id \"" + request.id + "\" is in use: " + user +
                             "; pick another id, or run `sandgate-launch down --sandbox " +
                             request.id + "` (or `gc` after a crash)");
  }
  std::set<unsigned> used = slots_taken_on_host(settings.pool, current_links(),
                                                current_inet_tables(), current_addresses());
  for (const SandboxState& s : dir.all()) used.insert(s.slot);
  const unsigned capacity = pool_capacity(settings.pool);
  const auto slot = lowest_free_slot(used, capacity);
  if (!slot) {
    throw LaunchError(1, "address pool " + settings.pool.to_string() + " is exhausted (" +
                             std::to_string(capacity) +
                             " sandboxes); run `sandgate-launch down` on one, `sandgate-launch "
                             "gc` after a crash, or widen launcher.pool");
  }
  SandboxState state;
  state.id = request.id;
  state.slot = *slot;
  state.host_ip = host_address(settings.pool, *slot).to_string();
  state.sandbox_ip = sandbox_address(settings.pool, *slot).to_string();
  state.owned_netns = request.netns_path.empty();
  state.netns = state.owned_netns ? name : request.netns_path;
  state.host_if = host_if_name(*slot);
  state.table = table_name(*slot);
  state.dropin = dropin;
  state.mode = request.mode;
  state.pid = ::getpid();
  state.dns_address = state.host_ip;
  try {
    dir.write(state);
  } catch (const std::runtime_error& e) {
    throw LaunchError(1, e.what());
  }
  return state;
}

const std::vector<std::string> kIpv6Sysctls = {"/proc/sys/net/ipv6/conf/all/disable_ipv6",
                                               "/proc/sys/net/ipv6/conf/default/disable_ipv6"};

// Whether lo is up in the namespace at `netns_path` (`ip -j link show dev lo`).
bool loopback_up_in(const std::string& netns_path) {
  const ToolResult r = run_tool(
      {"nsenter", "--net=" + netns_path, tool_path("ip"), "-j", "link", "show", "dev", "lo"});
  boost::system::error_code ec;
  const boost::json::value doc = boost::json::parse(r.out, ec);
  if (!r.ok() || ec || !doc.is_array() || doc.as_array().empty()) return false;
  const auto* link = doc.as_array()[0].if_object();
  const auto* flags = link != nullptr ? link->if_contains("flags") : nullptr;
  if (flags == nullptr || !flags->is_array()) return false;
  for (const auto& flag : flags->as_array()) {
    if (flag.is_string() && flag.as_string() == "UP") return true;
  }
  return false;
}

// Puts back what setup changed in an attached (--netns) namespace. Returns error messages.
std::vector<std::string> restore_attached_netns(const SandboxState& s) {
  std::vector<std::string> errors;
  if (s.owned_netns || !fs::exists(s.netns_path())) return errors;
  const std::pair<const std::string*, const std::string*> sysctls[] = {
      {&kIpv6Sysctls[0], &s.ipv6_all_before}, {&kIpv6Sysctls[1], &s.ipv6_default_before}};
  for (const auto& [path, value] : sysctls) {
    if (value->empty()) continue;
    const std::string error = write_sysctls_in(s.netns_path(), {*path}, *value);
    if (!error.empty()) errors.push_back("restoring " + *path + ": " + error);
  }
  if (s.lo_down_before) {
    const ToolResult r = run_tool(
        {"nsenter", "--net=" + s.netns_path(), tool_path("ip"), "link", "set", "lo", "down"});
    if (!r.ok()) errors.push_back("setting lo down again: " + r.err);
  }
  return errors;
}

void wire_network(const StateDir& dir, const Settings& settings, SandboxState& s,
                  Rollback& rollback) {
  const std::string sandbox_if = sandbox_if_name(s.slot);
  if (!s.owned_netns) {
    // Not ours: what setup changes in it (IPv6 off, lo up) is recorded first and put back at
    // teardown (the link, its address and route go with the link).
    std::vector<std::string> before;
    const std::string error = read_sysctls_in(s.netns_path(), kIpv6Sysctls, &before);
    if (!error.empty())
      throw LaunchError(1, "reading the sandbox's IPv6 settings failed: " + error);
    s.ipv6_all_before = before[0];
    s.ipv6_default_before = before[1];
    s.lo_down_before = !loopback_up_in(s.netns_path());
    try {
      dir.write(s);
    } catch (const std::runtime_error& e) {
      throw LaunchError(1, e.what());
    }
    rollback.add([s] { restore_attached_netns(s); });
  }
  if (s.owned_netns) {
    dir.mark("netns", s.netns);
    rollback.add([&dir, n = s.netns] { dir.unmark("netns", n); });
    run_or_throw({"ip", "netns", "add", s.netns}, {}, "creating network namespace " + s.netns);
    rollback.add([n = s.netns] { run_tool({"ip", "netns", "del", n}); });
  }
  dir.mark("links", s.host_if);
  rollback.add([&dir, h = s.host_if] { dir.unmark("links", h); });
  run_or_throw({"ip", "link", "add", s.host_if, "type", "veth", "peer", "name", sandbox_if, "netns",
                s.netns_path()},
               {}, "creating veth pair " + s.host_if + "/" + sandbox_if);
  rollback.add([h = s.host_if] { run_tool({"ip", "link", "del", h}); });
  // IPv6 off inside before any interface comes up, so no address or route ever appears.
  const std::string sysctl_error = write_sysctls_in(s.netns_path(), kIpv6Sysctls, "1");
  if (!sysctl_error.empty())
    throw LaunchError(1, "disabling IPv6 in the sandbox failed: " + sysctl_error);
  run_or_throw({"nsenter", "--net=" + s.netns_path(), tool_path("ip"), "-batch", "-"},
               "link set lo up\n"
               "addr add " +
                   s.sandbox_ip + "/30 dev " + sandbox_if +
                   "\n"
                   "link set " +
                   sandbox_if +
                   " up\n"
                   "route add default via " +
                   s.host_ip + " dev " + sandbox_if + "\n",
               "configuring " + sandbox_if + " in " + s.netns);
  write_sysctls_in("/proc/self/ns/net", {"/proc/sys/net/ipv6/conf/" + s.host_if + "/disable_ipv6"},
                   "1");
  run_or_throw({"ip", "-batch", "-"},
               "addr add " + s.host_ip + "/30 dev " + s.host_if +
                   "\n"
                   "link set " +
                   s.host_if + " up\n",
               "configuring " + s.host_if);
  if (s.owned_netns) {
    // `ip netns exec` bind-mounts this over /etc/resolv.conf for the command it runs.
    const std::string etc = "/etc/netns/" + s.netns;
    std::error_code ec;
    fs::create_directories(etc, ec);
    rollback.add([etc] {
      std::error_code ignored;
      fs::remove_all(etc, ignored);
    });
    try {
      write_file_atomically(etc + "/resolv.conf", "nameserver " + s.dns_address + "\n", 0644);
    } catch (const std::runtime_error& e) {
      throw LaunchError(1, e.what());
    }
  }
  dir.mark("tables", s.table);
  rollback.add([&dir, t = s.table] { dir.unmark("tables", t); });
  run_or_throw(
      {"nft", "-f", "-"},
      nft_ruleset({s.slot, s.host_if, s.sandbox_ip, settings.transparent_port, settings.dns_port}),
      "installing nftables table inet " + s.table);
  rollback.add([t = s.table] { run_tool({"nft", "delete", "table", "inet", t}); });
}

// The daemon's reason for not activating sandbox `id`: its failed reload's errors.
std::string refused_message(const std::string& id, const SandboxStatus& status) {
  std::string out = "the daemon did not activate sandbox \"" + id +
                    "\": reloading its config failed (it kept the previous one): ";
  if (status.reload_errors.empty()) out += "no reason given";
  for (std::size_t i = 0; i < status.reload_errors.size(); ++i) {
    if (i > 0) out += "; ";
    out += status.reload_errors[i];
  }
  if (status.reload_more_errors > 0) {
    out += " (and " + std::to_string(status.reload_more_errors) + " more in its log)";
  }
  return out;
}

void register_with_daemon(const StateDir& dir, const Settings& settings,
                          const SandboxRequest& request, const SandboxState& s,
                          Rollback& rollback) {
  // Which reloads began after this moment: when the last of them to finish failed, the daemon
  // refuses the config as it now is (after a failed reload it reads every drop-in again, ours
  // included, and fails until the config is fixed), so the sandbox will not become active.
  const SandboxStatus before =
      query_sandbox(settings.admin_host, settings.admin_port, s.id, std::chrono::seconds(2));
  const std::string dropin_name = fs::path(s.dropin).filename().string();
  dir.mark("dropins", dropin_name);
  rollback.add([&dir, dropin_name] { dir.unmark("dropins", dropin_name); });
  try {
    write_file_atomically(s.dropin, dropin_text(s.id, request.profile, s.sandbox_ip, request.allow),
                          0644);
  } catch (const std::runtime_error& e) {
    throw LaunchError(1,
                      std::string(e.what()) + "; check sandboxes_dir in " + settings.config_path);
  }
  rollback.add([d = s.dropin] { ::unlink(d.c_str()); });
  const auto deadline = std::chrono::steady_clock::now() + settings.ready_timeout;
  SandboxStatus status;
  while (true) {
    if (const int sig = take_pending_stop_signal()) {
      throw LaunchError(128 + sig, "stopped by signal " + std::to_string(sig) +
                                       " while waiting for the daemon; nothing was left behind");
    }
    status = query_sandbox(settings.admin_host, settings.admin_port, s.id, std::chrono::seconds(2));
    if (status.answer == SandboxStatus::Answer::active) return;
    if (before.reload_known && status.reload_known && status.reload_failed &&
        status.reload_finished > before.reloads_started) {
      throw LaunchError(2, refused_message(s.id, status));
    }
    if (std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(kPollInterval);
  }
  throw LaunchError(1, "the daemon did not report sandbox \"" + s.id + "\" active within " +
                           std::to_string(settings.ready_timeout.count()) + " ms" +
                           (status.detail.empty() ? "" : " (" + status.detail + ")") +
                           "; check that it reads sandboxes_dir " + settings.sandboxes_dir +
                           " and look for a reload error in its log");
}

}  // namespace

void write_ca_bundle(const Settings& settings) {
  std::vector<std::string> extras;
  if (!settings.interception_ca.empty()) {
    extras.push_back(read_certificates(settings.interception_ca, "interception.ca_cert", settings));
  }
  if (!settings.ca_file.empty()) {
    extras.push_back(read_certificates(settings.ca_file, "launcher.ca_file", settings));
  }
  const std::string bundle = make_ca_bundle(
      fs::exists(kSystemRootsFile) ? read_whole(kSystemRootsFile) : std::string(), extras);
  try {
    // World-readable in a 0755 directory: a --user command must read it (SSL_CERT_FILE), and
    // it holds only public certificates.
    const fs::path dir = fs::path(ca_bundle_path(settings)).parent_path();
    std::error_code ec;
    fs::create_directories(dir, ec);
    fs::permissions(dir,
                    fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                        fs::perms::others_read | fs::perms::others_exec,
                    ec);
    write_file_atomically(ca_bundle_path(settings), bundle, 0644);
    ::chmod(ca_bundle_path(settings).c_str(), 0644);  // whatever the umask
  } catch (const std::runtime_error& e) {
    throw LaunchError(1, e.what());
  }
}

std::string ca_bundle_path(const Settings& settings) {
  return settings.state_dir + "/ca/ca-bundle.pem";
}

void check_privileges() {
  if (!has_capability(CAP_NET_ADMIN) || !has_capability(CAP_SYS_ADMIN)) {
    throw LaunchError(1,
                      "needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN) to manage network "
                      "namespaces and nftables; run it as root");
  }
}

void check_privileges_and_tools() {
  check_privileges();
  for (const char* tool : {"ip", "nft", "nsenter", "setpriv"}) {
    if (!find_tool(tool)) {
      const std::string package = tool == std::string_view("ip")    ? "iproute2"
                                  : tool == std::string_view("nft") ? "nftables"
                                                                    : "util-linux";
      throw LaunchError(1, std::string(tool) + " not found in " + kToolDirsText + "; install " +
                               package + " (apt-get install " + package + ")");
    }
  }
}

SandboxState create_sandbox(const Settings& settings, const SandboxRequest& request) {
  check_request(settings, request);
  check_privileges_and_tools();
  check_daemon(settings, request.id);
  const StateDir dir(settings.state_dir);
  // Names and addresses are host-wide: no other launcher (whatever its state_dir) picks a slot
  // until this one's link, addresses and table exist.
  std::optional<HostLock> host_lock;
  try {
    host_lock.emplace();
  } catch (const std::runtime_error& e) {
    throw LaunchError(1, e.what());
  }
  SandboxState state = claim(dir, settings, request);
  Rollback rollback;
  rollback.add([&dir, id = state.id] { dir.remove(id); });
  try {
    write_ca_bundle(settings);
    wire_network(dir, settings, state, rollback);
    host_lock.reset();
    register_with_daemon(dir, settings, request, state, rollback);
    state.ready = true;
    dir.write(state);
  } catch (const std::runtime_error& e) {
    if (dynamic_cast<const LaunchError*>(&e) != nullptr) throw;
    throw LaunchError(1, e.what());
  }
  rollback.commit();
  return state;
}

std::vector<std::string> destroy_sandbox(const StateDir& dir, const SandboxState& s,
                                         const Settings& settings,
                                         std::chrono::milliseconds settle) {
  std::vector<std::string> errors;
  auto step = [&errors](bool present, const std::vector<std::string>& argv) {
    if (!present) return;
    const ToolResult r = run_tool(argv);
    if (!r.ok()) errors.push_back(argv[0] + " " + argv[1] + " " + argv[2] + ": " + r.err);
  };
  const std::string dropin_name = fs::path(s.dropin).filename().string();
  const bool unregistered = ::unlink(s.dropin.c_str()) == 0;
  if (unregistered || errno == ENOENT) dir.unmark("dropins", dropin_name);
  if (unregistered && settle.count() > 0) {
    const auto deadline = std::chrono::steady_clock::now() + settle;
    while (std::chrono::steady_clock::now() < deadline &&
           query_sandbox(settings.admin_host, settings.admin_port, s.id, settle).answer ==
               SandboxStatus::Answer::active) {
      std::this_thread::sleep_for(kPollInterval);
    }
  }
  // A step's mark goes once the thing is gone (or was never made).
  const std::size_t before_table = errors.size();
  step(run_tool({"nft", "list", "table", "inet", s.table}).ok(),
       {"nft", "delete", "table", "inet", s.table});
  if (errors.size() == before_table) dir.unmark("tables", s.table);
  const std::size_t before_link = errors.size();
  step(run_tool({"ip", "link", "show", "dev", s.host_if}).ok(), {"ip", "link", "del", s.host_if});
  if (errors.size() == before_link) dir.unmark("links", s.host_if);
  if (s.owned_netns) {
    // What the command left running (background children, or everything after a SIGKILLed
    // launcher) ends with the sandbox; else it would live on in a namespace without a route.
    kill_processes_in_netns(s.netns_path());
    step(fs::exists("/run/netns/" + s.netns), {"ip", "netns", "del", s.netns});
    std::error_code ec;
    fs::remove_all("/etc/netns/" + s.netns, ec);
    if (ec) errors.push_back("removing /etc/netns/" + s.netns + ": " + ec.message());
    if (!fs::exists("/run/netns/" + s.netns)) dir.unmark("netns", s.netns);
  }
  if (!s.owned_netns) {
    for (std::string& e : restore_attached_netns(s)) errors.push_back(std::move(e));
  }
  // After the namespace's processes are gone; kills whatever is still in it (an attached
  // --netns sandbox's command and its children).
  for (std::string& e : remove_cgroup(s.cgroups)) errors.push_back(std::move(e));
  if (errors.empty()) dir.remove(s.id);  // kept on failure so gc can retry
  return errors;
}

}  // namespace sandgate::launcher
