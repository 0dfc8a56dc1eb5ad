#include "support/git_origin.hpp"

#include <filesystem>

#include "support/subprocess.hpp"
#include "support/temp_dir.hpp"

namespace sandgate::test {

std::function<OriginReply(const RecordedRequest&)> git_http_backend(std::string project_root) {
  return [root = std::move(project_root)](const RecordedRequest& r) {
    const std::size_t q = r.target.find('?');
    std::vector<std::string> argv = {
        "env",
        "-i",
        "PATH=/usr/bin:/bin",
        "GIT_PROJECT_ROOT=" + root,
        "GIT_HTTP_EXPORT_ALL=1",
        "REMOTE_USER=test",
        "REMOTE_ADDR=127.0.0.1",
        "REQUEST_METHOD=" + r.method,
        "PATH_INFO=" + r.target.substr(0, q),
        "QUERY_STRING=" + (q == std::string::npos ? std::string() : r.target.substr(q + 1)),
        "CONTENT_LENGTH=" + std::to_string(r.body.size()),
    };
    if (r.has_header("Content-Type")) argv.push_back("CONTENT_TYPE=" + r.header("Content-Type"));
    if (r.has_header("Content-Encoding")) {
      argv.push_back("HTTP_CONTENT_ENCODING=" + r.header("Content-Encoding"));
    }
    if (r.has_header("Git-Protocol")) argv.push_back("GIT_PROTOCOL=" + r.header("Git-Protocol"));
    argv.insert(argv.end(), {"git", "http-backend"});
    const CommandResult cgi = run_command(argv, std::chrono::seconds(20), r.body);
    // CGI output: header lines, an empty line, the body. "Status:" sets the status.
    std::size_t end = cgi.out.find("\r\n\r\n");
    std::size_t skip = 4;
    if (end == std::string::npos) {
      end = cgi.out.find("\n\n");
      skip = 2;
    }
    if (cgi.exit_code != 0 || end == std::string::npos) {
      return OriginReply::with_length(500, "git http-backend failed: " + cgi.err);
    }
    int status = 200;
    std::vector<std::pair<std::string, std::string>> headers;
    std::size_t at = 0;
    const std::string head = cgi.out.substr(0, end);
    while (at < head.size()) {
      std::size_t eol = head.find('\n', at);
      if (eol == std::string::npos) eol = head.size();
      std::string line = head.substr(at, eol - at);
      if (!line.empty() && line.back() == '\r') line.pop_back();
      at = eol + 1;
      const std::size_t colon = line.find(':');
      if (colon == std::string::npos) continue;
      std::string name = line.substr(0, colon);
      std::string value = line.substr(line.find_first_not_of(' ', colon + 1));
      if (name == "Status") {
        status = std::stoi(value);
      } else if (name == "Content-Length") {
        // Dumb-HTTP files come with one; with_length writes its own, and two would make the
        // reply malformed for an HTTP/2 client.
        continue;
      } else {
        headers.emplace_back(std::move(name), std::move(value));
      }
    }
    return OriginReply::with_length(status, cgi.out.substr(end + skip), std::move(headers));
  };
}

std::string make_bare_repository(const std::string& path, const std::string& file,
                                 const std::string& content) {
  TempDir work;
  const std::string tree = work.file("tree");
  std::filesystem::create_directories(tree);
  work.write("tree/" + file, content);
  const std::vector<std::vector<std::string>> steps = {
      {"git", "-C", tree, "init", "-q", "-b", "main"},
      {"git", "-C", tree, "add", file},
      {"git", "-C", tree, "-c", "user.name=t", "-c", "user.email=t@example.test", "commit", "-q",
       "-m", "first"},
      {"git", "clone", "-q", "--bare", tree, path},
  };
  for (const auto& step : steps) {
    const CommandResult r = run_command(step);
    if (r.exit_code != 0) return step[3] + ": " + r.err;
  }
  return {};
}

}  // namespace sandgate::test
