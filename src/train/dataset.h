// Training input: records read from a CSV (with header) or a text file (one
// record per line), and the token stream / sequence batches built from them.
//
// Stream layout (docs/reference.md §1): every record is encoded (ending with
// <n>) and the encodings are concatenated into one stream, which is cut into
// chunks of seq_length + 1 tokens (input = chunk[:-1], target = chunk[1:]).
// The chunks are shuffled once with the run's seed and batched; with
// validation_split every 5th batch is held out for validation (the same
// batches every epoch, so validation never sees training chunks). Training
// batches are reshuffled every epoch through a shuffle buffer of buffer_size
// chunks (TensorFlow's Dataset.shuffle semantics). With a field tokenizer each
// stream token also has its legal id range (tokenize/legal_ranges.h), kept per
// stream position (2 bytes a token), so chunks that start inside a record get
// its ranges; batches carry them in Batch::legal_lo/hi.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "tokenize/legal_ranges.h"
#include "tokenize/tokenizer.h"
#include "util/rng.h"
#include "util/status.h"

namespace ds {

struct InputData {
  std::string path;
  char delimiter = 0;               // 0: text lines
  std::vector<std::string> header;  // CSV only
  std::vector<std::vector<std::string>> records;  // [n][fields]
  std::vector<int64_t> lines;       // [n] physical line of each record (for errors)
};

// Reads the whole input. CSV: header row required, every row must have the
// header's field count (error names file:line). Text: one record per line,
// blank lines skipped. max_records 0 = all. Errors for an empty file, a header
// without records, invalid UTF-8, NUL bytes.
Result<InputData> ReadInput(const std::string& path, char delimiter, int64_t max_records);

// Value-token records (Tokenizer::decodes_records: the field tokenizer) are
// a few tokens per column, so the sequence shape follows the table instead of
// the char defaults: seq_length = the longest record in tokens, at most
// kMaxRecordSeq (each sequence then holds one record, from the <n> before it
// to its <n>; longer records, long free text, continue in the next one) and
// batch_size = clamp(S / 16, 1, min(batch_size, kMaxRecordBatch)) with S =
// total_tokens / seq_length (about the number of sequences), so that a table
// of 50 rows still gives 16 batches (13 for training, 3 for validation), and
// larger tables get many optimizer steps per epoch (short sequences learn
// faster from more, smaller steps: docs/typed_fields.md). Only the settings
// whose set_* is true change.
inline constexpr int kMaxRecordSeq = 2048;
inline constexpr int kMaxRecordBatch = 32;
void AdaptRecordShape(int64_t total_tokens, int max_record_tokens, bool set_seq, bool set_batch,
                      int* seq_length, int* batch_size);
// The longest record of a value-token tokenizer, in tokens; 0 for others.
int MaxRecordTokens(const Tokenizer& tok);
// Tokens of every record (EncodeRecord, <n> included; records that do not
// encode count 0: SequenceData::Build reports them).
int64_t RecordTokens(const InputData& input, const Tokenizer& tok);

// Legal id ranges (tokenize/legal_ranges.h) of a token stream: one index per
// token, the range of that token as a target; absent for tokenizers without
// ranges (Batch::legal_lo/hi then stay empty).
struct StreamRanges {
  std::unique_ptr<LegalRanges> table;  // null: no ranges
  std::vector<uint16_t> index;         // [tokens] parallel to the stream
  // Writes target position p's range (stream offset `at`) to lo[p], hi[p].
  void Fill(int64_t at, int n, int32_t* lo, int32_t* hi) const {
    for (int p = 0; p < n; ++p) {
      const uint16_t i = index[size_t(at + p)];
      lo[p] = table->lo(i);
      hi[p] = table->hi(i);
    }
  }
};

// The token stream cut into sequences.
class SequenceData {
 public:
  // Encodes `records` with `tok`. Errors if fewer than `min_sequences`
  // sequences of seq_length + 1 tokens result ("too few records").
  static Result<SequenceData> Build(const InputData& input, const Tokenizer& tok, int seq_length,
                                    int batch_size, bool validation_split, uint64_t seed);

  int seq_length() const { return seq_length_; }
  int batch_size() const { return batch_size_; }
  int64_t tokens() const { return int64_t(stream_.size()); }
  // Batches carry each target's legal range (the "legal" loss).
  bool legal_ranges() const { return ranges_.table != nullptr; }
  int64_t train_batches() const { return int64_t(train_chunks_.size()) / batch_size_; }
  int64_t val_batches() const { return int64_t(val_chunks_.size()) / batch_size_; }
  // Training batch order for one epoch (shuffle buffer of buffer_size chunks).
  std::vector<int64_t> EpochOrder(int epoch, int buffer_size) const;
  // Fills a batch from chunk ids order[b * batch_size .. +batch_size).
  void TrainBatch(const std::vector<int64_t>& order, int64_t b, Batch* out) const;
  void ValBatch(int64_t b, Batch* out) const;

 private:
  void Fill(const int64_t* chunk_ids, Batch* out) const;
  std::vector<int32_t> stream_;       // [tokens]
  StreamRanges ranges_;               // legal ranges of stream_'s tokens
  std::vector<int64_t> train_chunks_; // chunk start offsets into stream_
  std::vector<int64_t> val_chunks_;
  int seq_length_ = 0, batch_size_ = 0;
  uint64_t seed_ = 0;
};

// Differentially private training (privacy/): one example per record, so
// that the privacy unit is the record. Example of record r with tokens
// t1..tk (EncodeRecord, ending with <n> = tk): input [<n>, t1, .., t(k-1)],
// target [t1, .., tk]: the model learns the whole record starting from the
// record separator, exactly as generation starts. Records longer than
// max_steps tokens are truncated to their first max_steps tokens (counted and
// reported). A batch is padded to its longest record, and DP chunks also to
// PaddedRows rows (empty examples); padding has weight 0.
class RecordData {
 public:
  // DP-SGD's chunks pad their rows to PaddedRows(n, kDpRowQuantum)
  // (FillBatch): Poisson sampling makes the batch size differ at every step,
  // and the CPU backend's oneDNN matmuls are built (JIT) and cached per
  // shape, so unpadded every step built new ones (bench/dp_speed_field.sh:
  // ~6% of a DP step in dnnl_primitive_create, bwd dW 14.2 -> 8.5 ms per step
  // padded); 16 keeps the padding under 3% of a 512 batch.
  static constexpr int kDpRowQuantum = 16;
  // The least q k + 1 >= n (n itself when q = 1 or n <= 1). Odd on purpose:
  // the backends' activations are time-major (row t B + b), and a B that is a
  // multiple of 16 makes example b's rows 4 KiB-aligned strides apart, which
  // the per-example Gram reads of the clip path thrash in L1/L2 (clip layer
  // norms 9.9 -> 11.1 ms per step at B = 16 k, back to 9.3 at 16 k + 1).
  static int PaddedRows(int n, int q) { return q <= 1 || n <= 1 ? n : (n + q - 2) / q * q + 1; }

  static Result<RecordData> Build(const InputData& input, const Tokenizer& tok, int max_steps);

  int64_t records() const { return int64_t(offsets_.size()) - 1; }
  int64_t tokens() const { return int64_t(tokens_.size()); }
  int64_t truncated() const { return truncated_; }
  bool legal_ranges() const { return ranges_.table != nullptr; }
  int max_steps() const { return max_steps_; }
  // Training steps of record r (its tokens, truncated to max_steps).
  int64_t length(int64_t r) const {
    return std::min<int64_t>(offsets_[size_t(r) + 1] - offsets_[size_t(r)], max_steps_);
  }
  // Poisson sampling: each record independently with probability q.
  std::vector<int64_t> PoissonSample(double q, Philox* rng) const;
  // Fills a batch with the given records (T = longest of them), B =
  // PaddedRows(n, row_quantum): the rows past n are empty examples (weight 0
  // everywhere), which add nothing to any gradient, norm or loss.
  void FillBatch(const int64_t* ids, int n, Batch* out, int row_quantum = 1) const;

 private:
  std::vector<int32_t> tokens_;   // [total] records' tokens back to back
  std::vector<int64_t> offsets_;  // [records + 1]
  StreamRanges ranges_;           // legal ranges of tokens_
  int32_t end_id_ = 0;
  int32_t vocab_ = 0;
  int max_steps_ = 0;
  int64_t truncated_ = 0;
};

}  // namespace ds
