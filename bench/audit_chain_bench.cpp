// What the audit log's hash chain costs the audit writer per line (issue 39: at most 10 %).
// One benchmark writes the same batches of a typical allowed request's line (~600 bytes)
// through three AuditLogs on regular files, in turn: unchained, chained, and chained with
// Ed25519 checkpoints every 1000 lines. It measures two CPU times for each: the process's (the
// caller that formats and queues the line plus the writer thread that chains and writes it)
// and the writer thread's alone (AuditLog::writer_cpu_time(): the writer is one thread, so its
// CPU per line bounds how many lines a second the log takes). It reports the three per-line
// costs of each and their ratios to the unchained one, from the same run.
//
//   ./build/release/bench/audit_chain_bench --benchmark_min_time=2
#include <benchmark/benchmark.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>

#include "telemetry/audit_chain.hpp"
#include "telemetry/audit_log.hpp"

namespace {

using namespace sandgate;
using namespace std::chrono_literals;

constexpr int kLinesPerBatch = 1000;

double process_cpu_ns() {
  timespec t{};
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) * 1e9 + static_cast<double>(t.tv_nsec);
}

telemetry::AuditRecord allowed_request() {
  telemetry::AuditRecord r;
  r.event = "http_request";
  r.outcome = "success";
  r.sandbox_id = "agent-1";
  r.source_ip = "10.201.0.2";
  r.source_port = 43122;
  r.protocol = "http";
  r.host = "registry.npmjs.org";
  r.port = 443;
  r.destination_ip = "104.16.3.35";
  r.rule = "profiles.default.allow[0]";
  r.method = "GET";
  r.url_path = "/@types%2fnode/-/node-20.11.5.tgz";
  r.url_scheme = "https";
  r.http_version = "1.1";
  r.http_status = 200;
  r.ended = telemetry::Ended::completed;
  r.bytes_up = 412;
  r.bytes_down = 398'112;
  r.duration = 41ms;
  return r;
}

// One log file in a directory of its own, emptied after every batch so the run does not fill
// the disk (the writer appends, so it goes on at the new end).
struct Target {
  std::filesystem::path dir;
  std::string path;
  std::unique_ptr<telemetry::AuditLog> log;
  double cpu_ns = 0;
  double writer_ns = 0;

  // chained: the hash chain on; with_key: also a checkpoint signed every 1000 lines.
  Target(const std::string& name, bool chained, bool with_key) {
    std::string tmpl = (std::filesystem::temp_directory_path() / "sandgate-bench-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp");
    dir = tmpl;
    path = (dir / name).string();
    telemetry::AuditChainOptions options{chained, "", 1000, std::chrono::seconds(60)};
    if (with_key) {
      options.signing_key = (dir / "audit.key").string();
      telemetry::generate_signing_key(options.signing_key);
    }
    log = std::make_unique<telemetry::AuditLog>(path, telemetry::AuditLog::kDefaultMaxQueuedLines,
                                                options);
  }
  ~Target() {
    log.reset();
    std::filesystem::remove_all(dir);
  }
  void batch(const telemetry::AuditRecord& r) {
    const double start = process_cpu_ns();
    const auto writer_start = log->writer_cpu_time();
    for (int i = 0; i < kLinesPerBatch; ++i) log->write(r);
    log->flush();
    cpu_ns += process_cpu_ns() - start;
    writer_ns += static_cast<double>((log->writer_cpu_time() - writer_start).count());
    [[maybe_unused]] const int ignored = ::truncate(path.c_str(), 0);
  }
};

void BM_AuditWriterCpuPerLine(benchmark::State& state) {
  const telemetry::AuditRecord r = allowed_request();
  Target off("off.log", false, false);
  Target on("chained.log", true, false);
  Target signed_on("signed.log", true, true);
  std::int64_t batches = 0;
  for (auto _ : state) {
    // In turn, so that what the machine does meanwhile falls on all three alike.
    off.batch(r);
    on.batch(r);
    signed_on.batch(r);
    ++batches;
  }
  const double lines = static_cast<double>(batches) * kLinesPerBatch;
  state.counters["off_ns"] = off.cpu_ns / lines;
  state.counters["chained_ns"] = on.cpu_ns / lines;
  state.counters["signed_ns"] = signed_on.cpu_ns / lines;
  state.counters["chained_ratio"] = on.cpu_ns / off.cpu_ns;
  state.counters["signed_ratio"] = signed_on.cpu_ns / off.cpu_ns;
  state.counters["off_writer_ns"] = off.writer_ns / lines;
  state.counters["chained_writer_ns"] = on.writer_ns / lines;
  state.counters["signed_writer_ns"] = signed_on.writer_ns / lines;
  state.counters["chained_writer_ratio"] = on.writer_ns / off.writer_ns;
  state.counters["signed_writer_ratio"] = signed_on.writer_ns / off.writer_ns;
  if (off.log->write_failures() + on.log->write_failures() + signed_on.log->write_failures() > 0) {
    state.SkipWithError("lines were lost");
  }
}
BENCHMARK(BM_AuditWriterCpuPerLine)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
