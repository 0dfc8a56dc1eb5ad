// reload_config: a load that reads again only the drop-ins that changed. Registering one
// sandbox (the launcher renames one drop-in into sandboxes_dir) then costs the same with ten
// sandboxes as with ten thousand: the new config is a copy of the previous one whose
// sandboxes and indexes share every entry that did not change (common::ChunkedMap).

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <set>
#include <utility>

#include "config/config.hpp"
#include "config/load_state.hpp"
#include "config/sandboxes.hpp"
#include "config/toml_reader.hpp"

namespace sandgate::config {

namespace {

namespace fs = std::filesystem;
using detail::ErrorSink;
using detail::FileStamp;
using detail::LoadState;

// What the drop-in directory holds now, for the paths that may have changed: path -> stamp
// (nullopt: gone). False when it cannot be told (the directory cannot be listed, a file
// cannot be stat'ed): load_config then reports whatever is wrong.
//
// With names that need no listing (needs_listing), only the drop-in names among them are
// stat'ed. Otherwise (a swapped "..data" link a Kubernetes volume makes, drop-ins that are
// links) the directory is listed: every link and every file of another inode than its
// stamp's is stat'ed, and so is every name given; a regular file under the inode it was read
// with is taken as unchanged (an in-place rewrite shows up as a name given). Without names,
// everything is stat'ed. `links`: LoadState::links for the next state.
// Whether the names a burst changed call for listing the directory. A drop-in's name is
// stat'ed by itself. Another name can change what a drop-in reads only through a link: when
// some drop-in was a link at the last look, or when the name is now a link, a directory or
// anything but a regular file (a swapped "..data" link). A name that is gone or a regular
// file (the launcher's "ID.toml.tmp.PID", renamed into place by the time the burst ends) is
// passed over, so registering one sandbox never lists 10,000.
bool needs_listing(const fs::path& dir, const LoadState& state,
                   const std::vector<std::string>& changed) {
  for (const std::string& name : changed) {
    if (detail::is_drop_in_name(name) && name.find('/') == std::string::npos) continue;
    if (state.links || name.empty() || name.find('/') != std::string::npos) return true;
    struct ::stat st {};
    if (::lstat((dir / name).c_str(), &st) == 0 ? !S_ISREG(st.st_mode) : errno != ENOENT) {
      return true;
    }
  }
  return false;
}

bool current_stamps(const Config& previous, const LoadState& state,
                    const std::optional<std::vector<std::string>>& changed,
                    std::map<std::string, std::optional<FileStamp>>& out, bool& links) {
  const fs::path dir(previous.sandboxes_dir);
  links = state.links;
  bool failed = false;
  const auto stamp = [&](const std::string& path) {
    out[path] = detail::stamp_of(path, &failed);
    return !failed;
  };
  const auto plain = [](const std::string& name) {
    return detail::is_drop_in_name(name) && name.find('/') == std::string::npos;
  };
  if (changed && !needs_listing(dir, state, *changed)) {
    for (const std::string& name : *changed) {
      if (!plain(name)) continue;
      const std::string path = (dir / name).string();
      bool link = false;
      out[path] = detail::stamp_of(path, &failed, &link);
      if (failed) return false;
      links = links || link;
    }
    return true;
  }
  const std::set<std::string> named =
      changed ? std::set<std::string>(changed->begin(), changed->end()) : std::set<std::string>();
  const std::string prefix = (dir / "").string();  // as dir / name spells the paths
  DIR* listing = ::opendir(previous.sandboxes_dir.c_str());
  if (listing == nullptr) return false;
  bool read_error = false;
  links = false;                    // as this listing finds them
  std::size_t known_listed = 0;     // drop-ins of `state` seen in the listing
  std::vector<std::string> listed;  // drop-in paths listed
  for (;;) {
    errno = 0;
    const dirent* entry = ::readdir(listing);
    if (entry == nullptr) {
      read_error = errno != 0;
      break;
    }
    const std::string name = entry->d_name;
    if (!detail::is_drop_in_name(name)) continue;
    if (entry->d_type == DT_LNK || entry->d_type == DT_UNKNOWN) links = true;
    std::string path = prefix + name;
    const auto* known = state.drop_ins.find(path);
    if (known != nullptr) ++known_listed;
    if (changed && entry->d_type == DT_REG && !named.contains(name) && known != nullptr &&
        known->stamp.inode == entry->d_ino) {
      listed.push_back(std::move(path));  // unchanged: only needed to tell what went away
      continue;
    }
    if (!stamp(path)) break;
    listed.push_back(std::move(path));
  }
  const bool ok = !read_error && !failed;
  ::closedir(listing);
  if (!ok) return false;
  if (known_listed < state.drop_ins.size()) {  // some went away
    std::sort(listed.begin(), listed.end());
    for (const auto& [path, unused] : state.drop_ins) {
      if (!std::binary_search(listed.begin(), listed.end(), path)) {
        out.try_emplace(path, std::nullopt);
      }
    }
  }
  return true;
}

}  // namespace

Config reload_config(const Config& previous,
                     const std::optional<std::vector<std::string>>& changed) {
  const LoadState* state = previous.load_state.get();
  if (state == nullptr || state->main == nullptr || previous.sandboxes_dir.empty()) {
    return load_config(previous.path);
  }
  std::vector<ErrorSink::Entry> errors;
  ErrorSink main_sink(errors, previous.path, 0);
  const auto text = detail::read_file(previous.path, main_sink);
  if (!text || *text != state->main->text) return load_config(previous.path);

  std::map<std::string, std::optional<FileStamp>> now;
  bool links = false;
  if (!current_stamps(previous, *state, changed, now, links)) return load_config(previous.path);
  std::set<std::string> removed;                           // ids of sandboxes gone or replaced
  std::vector<std::pair<std::string, FileStamp>> to_read;  // by path, sorted
  for (const auto& [path, stamp] : now) {
    const LoadState::DropIn* known = state->drop_ins.find(path);
    const bool same = known != nullptr && stamp && known->stamp == *stamp;
    if (same) continue;
    if (known != nullptr) removed.insert(known->id);
    if (stamp) to_read.emplace_back(path, *stamp);
  }

  // The new and rewritten drop-ins, read as load_config reads them; any error and
  // load_config reports them all, in its order.
  detail::SandboxCollector collector(state->main->profiles, state->main->credentials,
                                     previous.launcher.pool);
  for (std::size_t i = 0; i < to_read.size(); ++i) {
    ErrorSink sink(errors, to_read[i].first, i + 1);
    const auto drop_in = detail::read_file(to_read[i].first, sink);
    if (!drop_in) continue;
    if (const auto root = detail::parse_toml(*drop_in, sink.file(), sink)) {
      collector.read_drop_in(*root, sink, drop_in->starts_with(kLauncherDropinMarker));
    }
  }
  if (!errors.empty()) return load_config(previous.path);
  const SandboxList added = SandboxList::from_sorted(collector.take());

  // Ids and source addresses are unique across all sandboxes, kept ones included.
  for (const Sandbox& sandbox : added) {
    if (previous.find_sandbox(sandbox.spec.id) != nullptr && !removed.contains(sandbox.spec.id)) {
      return load_config(previous.path);
    }
    for (const policy::IpAddress& source : sandbox.sources) {
      const std::string* owner = state->sources.find(source);
      if (owner != nullptr && !removed.contains(*owner)) return load_config(previous.path);
    }
  }

  // Everything as `previous` has it (a field added to Config is kept too), then the changes.
  Config next = previous;
  next.changes.reset();
  ErrorSink check_sink(errors, previous.path, 0);
  detail::check_placeholder_env(next, added, check_sink);
  if (!next.interception.enabled()) detail::require_interception_in_drop_ins(added, check_sink);
  if (!errors.empty()) return load_config(previous.path);

  auto next_state = std::make_shared<LoadState>(*state);  // shares what it does not change
  next_state->links = links;
  SandboxChanges changes;
  for (const auto& [path, stamp] : now) {
    if (!stamp) next_state->drop_ins.erase(path);
  }
  for (const std::string& id : removed) {
    if (const Sandbox* old = previous.find_sandbox(id)) {
      for (const policy::IpAddress& source : old->sources) next_state->sources.erase(source);
    }
    next.sandboxes.erase(id);
  }
  for (const auto& [id, sandbox] : added.index()) {
    next_state->drop_ins.insert_or_assign(sandbox->file,
                                          LoadState::DropIn{now.at(sandbox->file).value(), id});
    for (const policy::IpAddress& source : sandbox->sources) {
      next_state->sources.insert_or_assign(source, id);
    }
    next.sandboxes.insert(sandbox);
    changes.added.push_back(id);
  }
  changes.removed.assign(removed.begin(), removed.end());  // sorted, as std::set holds them
  next.load_state = std::move(next_state);
  next.changes = std::move(changes);
  return next;
}

}  // namespace sandgate::config
