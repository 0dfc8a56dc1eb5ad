#include "audit/verify.hpp"

#include <utility>

namespace sandgate::audit {

namespace tel = sandgate::telemetry;

namespace {

std::string seq_range(std::uint64_t first, std::uint64_t last) {
  return first == last ? "seq " + std::to_string(first)
                       : "seq " + std::to_string(first) + "-" + std::to_string(last);
}

}  // namespace

std::string_view tamper_name(Tamper t) {
  switch (t) {
    case Tamper::none:
      return "intact";
    case Tamper::edited:
      return "edited";
    case Tamper::dropped:
      return "dropped";
    case Tamper::inserted:
      return "inserted";
    case Tamper::reordered:
      return "reordered";
    case Tamper::truncated:
      return "truncated";
    case Tamper::restarted:
      return "chain restarted";
  }
  return "";
}

ChainVerifier::ChainVerifier(const tel::ChainPublicKey* key, std::optional<tel::ChainHead> head)
    : key_(key), head_(head) {}

void ChainVerifier::begin_file(std::string name) {
  file_ = std::move(name);
  line_no_ = 0;
}

void ChainVerifier::fail(Tamper t, Location where, std::string detail) {
  if (failed()) return;
  result_.tamper = t;
  result_.where = std::move(where);
  result_.detail = std::move(detail);
}

void ChainVerifier::line(std::string_view text) {
  ++line_no_;
  if (failed()) return;
  const Location here{file_, line_no_};
  const auto parsed = tel::parse_chained_line(text);
  if (gap_expected_) {
    if (parsed && parsed->seq == *gap_expected_) {
      fail(Tamper::reordered, gap_at_,
           "holds seq " + std::to_string(gap_seq_) + " where seq " +
               std::to_string(*gap_expected_) + " was due; that line comes later, at " +
               here.text() + ": lines are out of order");
    }
    return;  // told apart at a later line or at the end
  }
  if (!parsed) {
    if (!have_prev_) {
      ++result_.unchained_lines;  // written before the chain began
      return;
    }
    fail(Tamper::edited, here,
         "is not a whole chained audit line (edited, cut short, or inserted by hand)");
    return;
  }
  const tel::ChainDigest hash = tel::chain_hash(text);
  if (!parsed->start.empty()) {
    if (have_prev_) {
      fail(Tamper::restarted, here,
           "starts a new chain (\"" + parsed->start + "\"): the lines up to " + prev_at_.text() +
               " (" + seq_range(result_.first_seq, prev_.seq) + ") are not linked to it");
      return;
    }
    result_.start = here.text() + " (" + parsed->start + ")";
  } else if (have_prev_ && parsed->seq == prev_.seq + 1 && parsed->prev != prev_.hash) {
    fail(Tamper::edited, prev_at_,
         "(seq " + std::to_string(prev_.seq) +
             ") no longer hashes to the chain.prev the next line carries (" + here.text() + ")");
    return;
  } else if (have_prev_ && parsed->seq <= prev_.seq) {
    fail(Tamper::inserted, here,
         "repeats seq " + std::to_string(parsed->seq) + " after seq " + std::to_string(prev_.seq) +
             " (" + prev_at_.text() + "): a line was inserted or copied here or just before");
    return;
  } else if (have_prev_ && parsed->seq > prev_.seq + 1) {
    gap_expected_ = prev_.seq + 1;
    gap_seq_ = parsed->seq;
    gap_at_ = here;
    gap_at_file_start_ = line_no_ == 1 && prev_at_.file != file_;
    return;
  }
  accept(*parsed, hash, here);
}

void ChainVerifier::accept(const tel::ChainedLine& line, const tel::ChainDigest& hash,
                           const Location& here) {
  if (!have_prev_) {
    result_.first_seq = line.seq;
    vouched_seq_ = line.seq - 1;
  }
  if (line.code == tel::kCheckpointCode) {
    check_checkpoint(line, here);
    if (failed()) return;
  }
  if (head_ && line.seq == head_->seq) {
    head_line_ = here;
    head_matches_ = hash == head_->hash;
  }
  have_prev_ = true;
  prev_ = tel::ChainHead{line.seq, hash};
  prev_at_ = here;
  result_.last_seq = line.seq;
}

// A checkpoint signs the line right before it: its head is that line's hash, which the
// checkpoint's own chain.prev, already checked, names too.
void ChainVerifier::check_checkpoint(const tel::ChainedLine& line, const Location& here) {
  if (!have_prev_ || line.last_seq != prev_.seq || line.head != prev_.hash ||
      line.first_seq > line.last_seq) {
    fail(Tamper::edited, here,
         "is a checkpoint whose range or head is not that of the lines before it");
    return;
  }
  CheckpointSeen seen{here, line.first_seq, line.last_seq, line.key_id, false};
  if (key_ != nullptr) {
    if (line.key_id != key_->key_id()) {
      fail(Tamper::edited, here,
           "is a checkpoint signed by key " + line.key_id + ", not by the key given (" +
               key_->key_id() + ")");
      return;
    }
    if (!key_->verify(tel::checkpoint_message(line.first_seq, line.last_seq, line.head),
                      line.signature)) {
      fail(Tamper::edited, here, "is a checkpoint whose signature does not verify");
      return;
    }
    seen.signature_checked = true;
  }
  result_.checkpoints.push_back(std::move(seen));
  vouched_seq_ = line.seq;
}

VerifyResult ChainVerifier::finish() {
  if (gap_expected_ && !failed()) {
    const std::string missing = seq_range(*gap_expected_, gap_seq_ - 1);
    if (gap_at_file_start_) {
      fail(Tamper::truncated, prev_at_,
           "is the last line of its file (seq " + std::to_string(prev_.seq) +
               "), but the next file begins at seq " + std::to_string(gap_seq_) + " (" +
               gap_at_.text() + "): " + missing + " were cut off the end");
    } else {
      fail(Tamper::dropped, gap_at_,
           "holds seq " + std::to_string(gap_seq_) + ", but the line before it (" +
               prev_at_.text() + ") holds seq " + std::to_string(prev_.seq) + ": " + missing +
               " were removed");
    }
  }
  if (!failed() && head_ && have_prev_) {
    if (head_->seq > prev_.seq) {
      fail(Tamper::truncated, prev_at_,
           "is the last line (seq " + std::to_string(prev_.seq) +
               "), but the head sandgate saved says the chain reached seq " +
               std::to_string(head_->seq) + ": " + seq_range(prev_.seq + 1, head_->seq) +
               " were cut off the end");
    } else if (head_line_ && !head_matches_) {
      fail(Tamper::edited, *head_line_,
           "(seq " + std::to_string(head_->seq) +
               ") no longer hashes to the head sandgate saved for it");
    }
  }
  if (have_prev_ && vouched_seq_ < prev_.seq) result_.unvouched_from = vouched_seq_ + 1;
  return std::move(result_);
}

}  // namespace sandgate::audit
