#pragma once

#include <functional>
#include <string>

#include "support/http_origin.hpp"

namespace sandgate::test {

// An HttpOrigin handler that serves the repositories under `project_root` with the real
// `git http-backend` (CGI, one process per request): smart HTTP, fetch and push (receive-pack
// enabled by REMOTE_USER), and dumb HTTP, which http-backend serves from the same bare
// repositories without `git update-server-info` (info/refs and objects/info/packs made on the
// fly, HEAD and objects/... as files). Pair it with an HTTPS HttpOrigin to have a GitHub-like
// remote.
std::function<OriginReply(const RecordedRequest&)> git_http_backend(std::string project_root);

// Creates a bare repository at `path` holding one commit on main with `file` = `content`.
// Returns an empty string, or what went wrong.
std::string make_bare_repository(const std::string& path, const std::string& file,
                                 const std::string& content);

}  // namespace sandgate::test
