#pragma once

// Internal to src/config: what one load read (Config::load_state), so that reload_config can
// read again only the drop-ins that changed, and the helpers config.cpp and reload.cpp share.

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "common/chunked_map.hpp"
#include "config/config.hpp"
#include "config/credentials.hpp"
#include "config/sandboxes.hpp"
#include "config/toml_reader.hpp"

namespace sandgate::config::detail {

// One version of a file, told apart without reading it: a rename into place (how the
// launcher writes) changes the inode, a rewrite the size or the modification time.
struct FileStamp {
  std::uint64_t device = 0;
  std::uint64_t inode = 0;
  std::int64_t size = 0;
  std::int64_t mtime_ns = 0;
  bool operator==(const FileStamp&) const = default;
};

// The stamp of a regular file (symlinks followed); nullopt when there is none (absent, or not
// a regular file). `failed` is set when stat(2) fails for another reason (EACCES, ...).
std::optional<FileStamp> stamp_of(const std::string& path, bool* failed = nullptr);

// Same, and whether `path` itself is a symbolic link (lstat(2), then stat(2) through it).
std::optional<FileStamp> stamp_of(const std::string& path, bool* failed, bool* link);

// Whether a name in sandboxes_dir is a drop-in: "*.toml", not a dot-file.
bool is_drop_in_name(std::string_view name);

// What one load read. Copied by each reload that reuses it: every part is shared, or a
// ChunkedMap whose copies share what did not change, so the copy costs little whatever the
// number of drop-ins.
struct LoadState {
  struct DropIn {
    FileStamp stamp;  // when it was read
    std::string id;   // the sandbox it defines (every drop-in of a good load defines one)
  };
  // The main file, and what its sandboxes were read with: a drop-in read later points at the
  // same shared profile lists.
  struct Main {
    std::string text;  // as read
    Profiles profiles;
    Credentials credentials;
  };
  std::shared_ptr<const Main> main;
  common::ChunkedMap<std::string, DropIn> drop_ins;  // by path
  // Every sandbox's source addresses (main file and drop-ins): address -> sandbox id.
  common::ChunkedMap<policy::IpAddress, std::string> sources;
  // Some drop-in name in the directory was a symbolic link (or of a type readdir did not
  // say) when it was last looked at: another name changing may change what it reads.
  bool links = false;
};

std::optional<std::string> read_file(const std::string& path, ErrorSink& sink);
std::optional<toml::table> parse_toml(std::string_view text, const std::string& file,
                                      ErrorSink& sink);

// Two credentials of one sandbox that set the same variable would leave the sandbox one
// placeholder for two hosts' credentials: an error where the sandbox is defined.
void check_placeholder_env(const Config& config, const SandboxList& sandboxes, ErrorSink& sink);

// Drop-in sandboxes with keys that make sandgate terminate TLS, when [interception] is off.
void require_interception_in_drop_ins(const SandboxList& sandboxes, ErrorSink& sink);

}  // namespace sandgate::config::detail
