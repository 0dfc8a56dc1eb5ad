#include "telemetry/audit_chain.hpp"

#include <fcntl.h>
#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/json/object.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <stdexcept>

#include "common/sha256.hpp"
#include "telemetry/audit_log.hpp"

namespace sandgate::telemetry {

namespace json = boost::json;

namespace {

using PkeyPtr = std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)>;
using BioPtr = std::unique_ptr<BIO, decltype(&BIO_free)>;
using MdCtxPtr = std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)>;

constexpr std::size_t kSignatureBytes = 64;  // Ed25519
// How much of the log's end is read at start to find its last complete line (a line is at
// most a few KiB: every field is cut to kMaxAuditFieldBytes).
constexpr std::size_t kTailBytes = 256 * 1024;

std::string bio_text(BIO* bio) {
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio, &data);
  return n > 0 ? std::string(data, static_cast<std::size_t>(n)) : std::string();
}

std::string key_id_of(EVP_PKEY* key) {
  std::array<unsigned char, 32> raw{};
  std::size_t size = raw.size();
  if (EVP_PKEY_get_raw_public_key(key, raw.data(), &size) != 1) return {};
  const ChainDigest d =
      chain_hash(std::string_view(reinterpret_cast<const char*>(raw.data()), size));
  return to_hex(d).substr(0, 16);
}

std::string public_pem(EVP_PKEY* key) {
  const BioPtr bio(BIO_new(BIO_s_mem()), &BIO_free);
  if (!bio || PEM_write_bio_PUBKEY(bio.get(), key) != 1) {
    throw std::runtime_error("cannot encode the audit signing key's public key");
  }
  return bio_text(bio.get());
}

// Writes `text` to `path` through a temporary and a rename, so a reader never sees half of it.
bool replace_file(const std::string& path, std::string_view text, mode_t mode) {
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) return false;
  const bool written = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ::close(fd);
  return written && std::rename(tmp.c_str(), path.c_str()) == 0;
}

std::optional<std::uint64_t> as_count(const json::value* v) {
  if (v == nullptr) return std::nullopt;
  if (v->is_uint64()) return v->get_uint64();
  if (v->is_int64() && v->get_int64() >= 0) return static_cast<std::uint64_t>(v->get_int64());
  return std::nullopt;
}

bool read_digest(const json::value* v, ChainDigest& out) {
  return v != nullptr && v->is_string() && from_hex(v->get_string(), out.data(), out.size());
}

}  // namespace

std::optional<ChainHead> read_chain_head(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "re");
  if (f == nullptr) return std::nullopt;
  std::array<char, 256> buf{};
  const std::size_t n = std::fread(buf.data(), 1, buf.size(), f);
  std::fclose(f);
  json::error_code ec;
  const json::value v = json::parse(std::string_view(buf.data(), n), ec);
  const json::object* o = ec ? nullptr : v.if_object();
  if (o == nullptr) return std::nullopt;
  ChainHead head;
  const auto seq = as_count(o->if_contains("seq"));
  if (!seq || !read_digest(o->if_contains("hash"), head.hash)) return std::nullopt;
  head.seq = *seq;
  return head;
}

namespace {

// The last complete line of the file (without its '\n'); empty when there is none.
std::string last_line(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {};
  struct stat st {};
  std::string tail;
  if (::fstat(fd, &st) == 0 && st.st_size > 0) {
    const auto size = static_cast<std::size_t>(st.st_size);
    const std::size_t want = std::min(size, kTailBytes);
    tail.resize(want);
    const ssize_t n = ::pread(fd, tail.data(), want, static_cast<off_t>(size - want));
    tail.resize(n > 0 ? static_cast<std::size_t>(n) : 0);
  }
  ::close(fd);
  const std::size_t end = tail.rfind('\n');  // a fragment after it is no line
  if (end == std::string::npos) return {};
  const std::size_t begin = end == 0 ? std::string::npos : tail.rfind('\n', end - 1);
  return tail.substr(begin == std::string::npos ? 0 : begin + 1,
                     end - (begin == std::string::npos ? 0 : begin + 1));
}

}  // namespace

ChainDigest chain_hash(std::string_view bytes) {
  return sha256_digest(bytes);
}

namespace {

// Appends the hex of `bytes` to `out` (no temporary: the writer does this for every line).
void append_hex(std::string_view bytes, std::string& out) {
  static constexpr char kDigits[] = "0123456789abcdef";
  const std::size_t at = out.size();
  out.resize(at + bytes.size() * 2);
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    const auto b = static_cast<unsigned char>(bytes[i]);
    out[at + 2 * i] = kDigits[b >> 4U];
    out[at + 2 * i + 1] = kDigits[b & 0xFU];
  }
}

void append_hex(const ChainDigest& d, std::string& out) {
  append_hex(std::string_view(reinterpret_cast<const char*>(d.data()), d.size()), out);
}

}  // namespace

std::string to_hex(std::string_view bytes) {
  std::string out;
  append_hex(bytes, out);
  return out;
}

bool from_hex(std::string_view hex, unsigned char* out, std::size_t size) {
  if (hex.size() != size * 2) return false;
  for (std::size_t i = 0; i < size; ++i) {
    unsigned value = 0;
    const auto [end, ec] = std::from_chars(hex.data() + 2 * i, hex.data() + 2 * i + 2, value, 16);
    if (ec != std::errc() || end != hex.data() + 2 * i + 2) return false;
    out[i] = static_cast<unsigned char>(value);
  }
  return true;
}

std::optional<ChainedLine> parse_chained_line(std::string_view line) {
  json::error_code ec;
  const json::value v = json::parse(line, ec);
  const json::object* root = ec ? nullptr : v.if_object();
  if (root == nullptr) return std::nullopt;
  const json::value* chain_value = root->if_contains("chain");
  const json::object* chain = chain_value == nullptr ? nullptr : chain_value->if_object();
  if (chain == nullptr) return std::nullopt;
  ChainedLine out;
  const auto seq = as_count(chain->if_contains("seq"));
  if (!seq || !read_digest(chain->if_contains("prev"), out.prev)) return std::nullopt;
  out.seq = *seq;
  if (const json::value* start = chain->if_contains("start")) {
    if (!start->is_string()) return std::nullopt;
    out.start = start->get_string();
  }
  if (const json::value* event = root->if_contains("event"); event && event->is_object()) {
    if (const json::value* code = event->get_object().if_contains("code");
        code && code->is_string()) {
      out.code = code->get_string();
    }
  }
  if (out.code != kCheckpointCode) return out;
  const json::value* fields_value = root->if_contains("audit_chain");
  const json::object* fields = fields_value == nullptr ? nullptr : fields_value->if_object();
  if (fields == nullptr) return std::nullopt;
  const auto first = as_count(fields->if_contains("first_seq"));
  const auto last = as_count(fields->if_contains("last_seq"));
  const json::value* key_id = fields->if_contains("key_id");
  const json::value* signature = fields->if_contains("signature");
  std::array<unsigned char, kSignatureBytes> sig{};
  if (!first || !last || !read_digest(fields->if_contains("head"), out.head) || key_id == nullptr ||
      !key_id->is_string() || signature == nullptr || !signature->is_string() ||
      !from_hex(signature->get_string(), sig.data(), sig.size())) {
    return std::nullopt;
  }
  out.first_seq = *first;
  out.last_seq = *last;
  out.key_id = key_id->get_string();
  out.signature.assign(reinterpret_cast<const char*>(sig.data()), sig.size());
  return out;
}

std::string checkpoint_message(std::uint64_t first_seq, std::uint64_t last_seq,
                               const ChainDigest& head) {
  return "sandgate-audit-checkpoint/1\n" + std::to_string(first_seq) + "\n" +
         std::to_string(last_seq) + "\n" + to_hex(head) + "\n";
}

struct ChainPublicKey::Key {
  PkeyPtr pkey{nullptr, &EVP_PKEY_free};
};

ChainPublicKey::ChainPublicKey(std::string_view pem) : key_(std::make_unique<Key>()) {
  const BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())), &BIO_free);
  if (bio) key_->pkey.reset(PEM_read_bio_PUBKEY(bio.get(), nullptr, nullptr, nullptr));
  if (!key_->pkey || EVP_PKEY_get_base_id(key_->pkey.get()) != EVP_PKEY_ED25519) {
    throw std::runtime_error("no Ed25519 public key (PEM) in it");
  }
  key_id_ = key_id_of(key_->pkey.get());
}
ChainPublicKey::~ChainPublicKey() = default;
ChainPublicKey::ChainPublicKey(ChainPublicKey&&) noexcept = default;
ChainPublicKey& ChainPublicKey::operator=(ChainPublicKey&&) noexcept = default;

bool ChainPublicKey::verify(std::string_view message, std::string_view signature) const {
  const MdCtxPtr ctx(EVP_MD_CTX_new(), &EVP_MD_CTX_free);
  // Ed25519 hashes the message itself: no digest is named (NULL md).
  return ctx && EVP_DigestVerifyInit(ctx.get(), nullptr, nullptr, nullptr, key_->pkey.get()) == 1 &&
         EVP_DigestVerify(ctx.get(), reinterpret_cast<const unsigned char*>(signature.data()),
                          signature.size(), reinterpret_cast<const unsigned char*>(message.data()),
                          message.size()) == 1;
}

std::string generate_signing_key(const std::string& path) {
  const PkeyPtr key(EVP_PKEY_Q_keygen(nullptr, nullptr, "ED25519"), &EVP_PKEY_free);
  const BioPtr bio(BIO_new(BIO_s_mem()), &BIO_free);
  if (!key || !bio ||
      PEM_write_bio_PrivateKey(bio.get(), key.get(), nullptr, nullptr, 0, nullptr, nullptr) != 1) {
    throw std::runtime_error("cannot generate an Ed25519 key");
  }
  const std::string pem = bio_text(bio.get());
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) throw std::runtime_error(path + ": " + std::strerror(errno));
  const bool written = ::write(fd, pem.data(), pem.size()) == static_cast<ssize_t>(pem.size());
  const int error = errno;
  ::close(fd);
  if (!written) {
    ::unlink(path.c_str());
    throw std::runtime_error(path + ": " + std::strerror(error));
  }
  return public_pem(key.get());
}

namespace {

std::runtime_error key_error(const std::string& path, const std::string& why) {
  return std::runtime_error("audit signing key " + path + ": " + why);
}

// The private key, with the checks the CA key gets (src/tls): a regular file of `owner` that
// group and others cannot reach, holding an unencrypted Ed25519 key.
PkeyPtr read_signing_key(const std::string& path, uid_t owner) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) throw key_error(path, std::strerror(errno));
  struct stat st {};
  const bool stat_ok = ::fstat(fd, &st) == 0;  // the opened file: a rename cannot fool it
  std::string pem;
  if (stat_ok && S_ISREG(st.st_mode) && st.st_size < 64 * 1024) {
    pem.resize(static_cast<std::size_t>(st.st_size));
    const ssize_t n = ::read(fd, pem.data(), pem.size());
    pem.resize(n > 0 ? static_cast<std::size_t>(n) : 0);
  }
  ::close(fd);
  if (!stat_ok || !S_ISREG(st.st_mode)) throw key_error(path, "not a regular file");
  if ((st.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
    throw key_error(path, "accessible by group or others; run chmod 600 " + path);
  }
  if (st.st_uid != owner) {
    throw key_error(path, "owned by uid " + std::to_string(st.st_uid) +
                              ", not by the user sandgate runs as (uid " + std::to_string(owner) +
                              ")");
  }
  const BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())), &BIO_free);
  PkeyPtr key(bio ? PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr) : nullptr,
              &EVP_PKEY_free);
  if (!key || EVP_PKEY_get_base_id(key.get()) != EVP_PKEY_ED25519) {
    throw key_error(path,
                    "no unencrypted Ed25519 private key (PEM) in it; create one with "
                    "`sandgate audit keygen PATH`");
  }
  return key;
}

}  // namespace

std::string signing_key_problem(const std::string& path, uid_t owner) {
  try {
    read_signing_key(path, owner);
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return {};
}

// The private key, read once at start.
struct AuditChain::Signer {
  PkeyPtr key;
  std::string key_id;

  explicit Signer(const std::string& path)
      : key(read_signing_key(path, ::geteuid())), key_id(key_id_of(key.get())) {}
  std::string sign(std::string_view message) const {
    const MdCtxPtr ctx(EVP_MD_CTX_new(), &EVP_MD_CTX_free);
    std::string sig(kSignatureBytes, '\0');
    std::size_t size = sig.size();
    if (!ctx || EVP_DigestSignInit(ctx.get(), nullptr, nullptr, nullptr, key.get()) != 1 ||
        EVP_DigestSign(ctx.get(), reinterpret_cast<unsigned char*>(sig.data()), &size,
                       reinterpret_cast<const unsigned char*>(message.data()),
                       message.size()) != 1) {
      return {};
    }
    sig.resize(size);
    return sig;
  }
};

AuditChain::AuditChain(std::string log_path, const AuditChainOptions& options)
    : log_path_(std::move(log_path)), options_(options) {
  if (options_.checkpoint_lines == 0) options_.checkpoint_lines = 1;
  if (!options_.signing_key.empty()) {
    signer_ = std::make_unique<Signer>(options_.signing_key);
    if (!replace_file(log_path_ + ".pub", public_pem(signer_->key.get()), 0644)) {
      throw std::runtime_error("audit log: cannot write " + log_path_ +
                               ".pub: " + std::strerror(errno));
    }
  }
  const std::string tail = last_line(log_path_);
  std::optional<ChainHead> from_tail;
  if (const auto chained = tail.empty() ? std::nullopt : parse_chained_line(tail)) {
    from_tail = ChainHead{chained->seq, chain_hash(tail)};
  }
  const std::optional<ChainHead> from_file = read_chain_head(log_path_ + ".head");
  if (from_tail && (!from_file || from_tail->seq >= from_file->seq)) {
    head_ = *from_tail;
  } else if (from_file) {
    head_ = *from_file;
  } else {
    start_reason_ = tail.empty() ? "no earlier chain found" : "the log's last line is not chained";
  }
  vouched_seq_ = head_.seq;
}

AuditChain::~AuditChain() = default;

void AuditChain::append(std::string_view line, std::string& out) {
  // The line ends in "}\n": the chain field goes in before its closing brace.
  seal(line.substr(0, line.size() - 2), out);
  if (signer_ && head_.seq - vouched_seq_ >= options_.checkpoint_lines) checkpoint(out);
}

void AuditChain::seal(std::string_view body, std::string& out) {
  if (head_.seq == vouched_seq_) first_unvouched_ = std::chrono::steady_clock::now();
  const std::size_t at = out.size();
  out.append(body);
  out.append(body == "{" ? R"("chain":{"seq":)" : R"(,"chain":{"seq":)");
  std::array<char, 24> digits{};
  const auto end = std::to_chars(digits.data(), digits.data() + digits.size(), head_.seq + 1).ptr;
  out.append(digits.data(), end);
  out.append(R"(,"prev":")");
  append_hex(head_.hash, out);
  out.push_back('"');
  if (!start_reason_.empty()) {
    out.append(R"(,"start":")").append(start_reason_).push_back('"');
    start_reason_.clear();
  }
  out.append("}}");
  head_.hash = chain_hash(std::string_view(out).substr(at));
  ++head_.seq;
  out.push_back('\n');
}

void AuditChain::checkpoint(std::string& out) {
  if (!signer_ || head_.seq == vouched_seq_) return;
  const std::uint64_t first = vouched_seq_ + 1;
  const std::string signature = signer_->sign(checkpoint_message(first, head_.seq, head_.hash));
  json::object record{{"@timestamp", format_audit_timestamp(std::chrono::system_clock::now())},
                      {"ecs", {{"version", "8.11.0"}}},
                      {"event",
                       {{"code", kCheckpointCode},
                        {"kind", "event"},
                        {"category", json::array{"process"}},
                        {"type", json::array{"info"}},
                        {"outcome", signature.empty() ? "failure" : "success"}}},
                      {"audit_chain",
                       {{"first_seq", first},
                        {"last_seq", head_.seq},
                        {"head", to_hex(head_.hash)},
                        {"key_id", signer_->key_id},
                        {"signature", to_hex(signature)}}}};
  const std::string text = json::serialize(record);
  seal(std::string_view(text).substr(0, text.size() - 1), out);
  vouched_seq_ = head_.seq;  // the checkpoint line itself needs no checkpoint of its own
}

std::optional<std::chrono::steady_clock::time_point> AuditChain::checkpoint_due() const {
  if (!signer_ || head_.seq == vouched_seq_) return std::nullopt;
  return first_unvouched_ + options_.checkpoint_interval;
}

void AuditChain::save_head() const noexcept {
  try {
    const std::string text =
        R"({"seq":)" + std::to_string(head_.seq) + R"(,"hash":")" + to_hex(head_.hash) + "\"}\n";
    replace_file(log_path_ + ".head", text, 0640);
  } catch (...) {  // bad_alloc: the log itself still carries the chain
  }
}

}  // namespace sandgate::telemetry
