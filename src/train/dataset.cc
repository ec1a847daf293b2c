#include "train/dataset.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <span>

#include "io/csv.h"
#include "io/line_reader.h"
#include "tokenize/field_tokenizer.h"

namespace ds {

Result<InputData> ReadInput(const std::string& path, char delimiter, int64_t max_records) {
  InputData in;
  in.path = path;
  in.delimiter = delimiter;
  if (delimiter) {
    CsvOptions opts;
    opts.delimiter = delimiter;
    opts.has_header = true;
    DS_ASSIGN_OR_RETURN(auto reader, CsvReader::Open(path, opts));
    DS_RETURN_IF_ERROR(reader->RequireHeader());
    in.header = reader->header();
    DS_RETURN_IF_ERROR(ValidateHeader(in.header, path));
    std::vector<std::string> fields;
    while (max_records == 0 || int64_t(in.records.size()) < max_records) {
      DS_ASSIGN_OR_RETURN(bool more, reader->Next(&fields));
      if (!more) break;
      if (fields.size() != in.header.size())
        return DS_ERR(kInvalidInput, "{}:{}: expected {} fields (as in the header), found {}", path,
                      reader->record_line(), in.header.size(), fields.size());
      in.records.push_back(fields);
      in.lines.push_back(reader->record_line());
    }
    if (in.records.empty())
      return DS_ERR(kInvalidInput, "{}: header only, no records to train on", path);
  } else {
    DS_ASSIGN_OR_RETURN(auto reader, LineReader::Open(path));
    std::string line;
    while (max_records == 0 || int64_t(in.records.size()) < max_records) {
      DS_ASSIGN_OR_RETURN(bool more, reader->Next(&line));
      if (!more) break;
      if (line.empty()) continue;
      in.records.push_back({line});
      in.lines.push_back(reader->line());
    }
    if (in.records.empty()) return DS_ERR(kInvalidInput, "{}: empty input, no records", path);
  }
  return in;
}

void AdaptRecordShape(int64_t total_tokens, int max_record_tokens, bool set_seq, bool set_batch,
                      int* seq_length, int* batch_size) {
  if (set_seq && max_record_tokens > 0) *seq_length = std::min(max_record_tokens, kMaxRecordSeq);
  const int64_t sequences = total_tokens / std::max(1, *seq_length);
  if (set_batch)
    *batch_size = int(std::clamp<int64_t>(sequences / 16, 1, std::min(*batch_size, kMaxRecordBatch)));
}

int MaxRecordTokens(const Tokenizer& tok) {
  const auto* f = dynamic_cast<const FieldTokenizer*>(&tok);
  return f ? f->max_record_tokens() : 0;
}

int64_t RecordTokens(const InputData& input, const Tokenizer& tok) {
  int64_t total = 0;
  std::vector<int32_t> ids;
  for (const auto& r : input.records) {
    ids.clear();
    if (tok.EncodeRecord(r, &ids).ok()) total += int64_t(ids.size());
  }
  return total;
}

Result<SequenceData> SequenceData::Build(const InputData& input, const Tokenizer& tok,
                                         int seq_length, int batch_size, bool validation_split,
                                         uint64_t seed) {
  SequenceData d;
  d.seq_length_ = seq_length;
  d.batch_size_ = batch_size;
  d.seed_ = seed;
  // The stream starts with <n> so that every record, the first included, is
  // preceded by the record separator, as at generation time.
  d.stream_.push_back(tok.end_id());
  // Ranges per token: walked record by record, so a record split across
  // chunks keeps its ranges (they belong to stream positions, not chunks).
  // The leading <n> is never a target.
  if (LegalRanges::Applies(tok)) {
    d.ranges_.table = std::make_unique<LegalRanges>(tok);
    DS_ASSIGN_OR_RETURN(uint16_t all, d.ranges_.table->Intern(0, tok.vocab_size()));
    d.ranges_.index.push_back(all);
  }
  std::vector<int64_t> boundaries = {0};  // positions of the <n> before each record
  for (size_t i = 0; i < input.records.size(); ++i) {
    const size_t from = d.stream_.size();
    Status s = tok.EncodeRecord(input.records[i], &d.stream_);
    if (s.ok() && d.ranges_.table)
      s = d.ranges_.table->AppendRecord(
          std::span<const int32_t>(d.stream_.data() + from, d.stream_.size() - from),
          &d.ranges_.index);
    if (!s.ok())
      return DS_ERR(kInvalidInput, "{}:{}: {}", input.path, input.lines[i], s.message());
    boundaries.push_back(int64_t(d.stream_.size()) - 1);
  }
  // Chunks of seq_length + 1 tokens that START AT A RECORD BOUNDARY (input[0]
  // = <n>): training resets the LSTM state at each chunk, and generation starts
  // every record from a reset state and <n>; aligned chunks make the two
  // match. The next chunk starts at the last boundary inside the current one,
  // so consecutive chunks overlap by at most one partial record and every
  // token is trained on; a record longer than seq_length continues in a chunk
  // that starts where the previous one ended.
  const int64_t chunk = seq_length + 1;
  const int64_t total = int64_t(d.stream_.size());
  std::vector<int64_t> starts;
  size_t bi = 0;
  for (int64_t s = 0; s + chunk <= total;) {
    starts.push_back(s);
    while (bi + 1 < boundaries.size() && boundaries[bi + 1] <= s + seq_length - 1) ++bi;
    int64_t next = boundaries[bi] > s ? boundaries[bi] : s + seq_length;
    s = next;
  }
  const int64_t n_chunks = int64_t(starts.size());
  // Shuffle chunks once (fixed validation set), then assign every 5th batch.
  std::vector<int64_t> ids = starts;
  Philox rng(seed, 0x5e9u);
  for (int64_t i = n_chunks - 1; i > 0; --i) std::swap(ids[i], ids[rng.Below(uint64_t(i) + 1)]);
  const int64_t n_batches = n_chunks / batch_size;
  for (int64_t b = 0; b < n_batches; ++b) {
    auto& dst = (validation_split && b % 5 == 0) ? d.val_chunks_ : d.train_chunks_;
    for (int64_t j = 0; j < batch_size; ++j) dst.push_back(ids[b * batch_size + j]);
  }
  if (d.train_batches() < 1) {
    int64_t need_batches = validation_split ? 2 : 1;
    int64_t need_tokens = need_batches * batch_size * chunk;
    double tokens_per_record = double(d.stream_.size()) / double(input.records.size());
    int64_t need_records = int64_t(std::ceil(double(need_tokens) / tokens_per_record));
    return DS_ERR(kInvalidInput,
                  "{}: too few records: {} records give {} tokens = {} sequences of seq_length+1 "
                  "= {} tokens; training needs {} batch{} of batch_size {} sequences, about {} "
                  "records (or lower batch_size / seq_length{})",
                  input.path, input.records.size(), d.stream_.size(), n_chunks, chunk,
                  need_batches, need_batches > 1 ? "es" : "", batch_size, need_records,
                  validation_split ? ", or set validation_split false" : "");
  }
  return d;
}

std::vector<int64_t> SequenceData::EpochOrder(int epoch, int buffer_size) const {
  // TensorFlow Dataset.shuffle(buffer_size): keep a buffer of the next
  // buffer_size elements, emit a uniformly chosen one and refill its slot.
  Philox rng(seed_, 0x5eed0000ull + uint64_t(epoch));
  std::vector<int64_t> out;
  out.reserve(train_chunks_.size());
  std::vector<int64_t> buf;
  size_t next = 0;
  while (buf.size() < size_t(buffer_size) && next < train_chunks_.size())
    buf.push_back(train_chunks_[next++]);
  while (!buf.empty()) {
    size_t k = rng.Below(buf.size());
    out.push_back(buf[k]);
    if (next < train_chunks_.size()) {
      buf[k] = train_chunks_[next++];
    } else {
      buf[k] = buf.back();
      buf.pop_back();
    }
  }
  return out;
}

void SequenceData::Fill(const int64_t* starts, Batch* out) const {
  out->batch = batch_size_;
  out->steps = seq_length_;
  out->inputs.resize(size_t(batch_size_) * seq_length_);
  out->targets.resize(size_t(batch_size_) * seq_length_);
  out->weights.clear();
  const size_t n = ranges_.table ? size_t(batch_size_) * seq_length_ : 0;
  out->legal_lo.resize(n);
  out->legal_hi.resize(n);
  for (int b = 0; b < batch_size_; ++b) {
    const int32_t* src = stream_.data() + starts[b];
    std::copy(src, src + seq_length_, out->inputs.begin() + size_t(b) * seq_length_);
    std::copy(src + 1, src + 1 + seq_length_, out->targets.begin() + size_t(b) * seq_length_);
    if (n)
      ranges_.Fill(starts[b] + 1, seq_length_, out->legal_lo.data() + size_t(b) * seq_length_,
                   out->legal_hi.data() + size_t(b) * seq_length_);
  }
}

void SequenceData::TrainBatch(const std::vector<int64_t>& order, int64_t b, Batch* out) const {
  Fill(order.data() + b * batch_size_, out);
}

void SequenceData::ValBatch(int64_t b, Batch* out) const {
  Fill(val_chunks_.data() + b * batch_size_, out);
}

}  // namespace ds

namespace ds {

Result<RecordData> RecordData::Build(const InputData& input, const Tokenizer& tok, int max_steps) {
  RecordData d;
  d.end_id_ = tok.end_id();
  d.vocab_ = tok.vocab_size();
  d.max_steps_ = max_steps;
  d.offsets_.push_back(0);
  if (LegalRanges::Applies(tok)) d.ranges_.table = std::make_unique<LegalRanges>(tok);
  std::vector<int32_t> ids;
  for (size_t i = 0; i < input.records.size(); ++i) {
    ids.clear();
    Status s = tok.EncodeRecord(input.records[i], &ids);
    if (s.ok() && d.ranges_.table) s = d.ranges_.table->AppendRecord(ids, &d.ranges_.index);
    if (!s.ok()) return DS_ERR(kInvalidInput, "{}:{}: {}", input.path, input.lines[i], s.message());
    if (int64_t(ids.size()) > max_steps) {
      ids.resize(size_t(max_steps));
      if (d.ranges_.table) d.ranges_.index.resize(d.tokens_.size() + size_t(max_steps));
      ++d.truncated_;
    }
    d.tokens_.insert(d.tokens_.end(), ids.begin(), ids.end());
    d.offsets_.push_back(int64_t(d.tokens_.size()));
  }
  return d;
}

std::vector<int64_t> RecordData::PoissonSample(double q, Philox* rng) const {
  std::vector<int64_t> out;
  for (int64_t r = 0; r < records(); ++r)
    if (rng->UniformDouble() < q) out.push_back(r);
  return out;
}

void RecordData::FillBatch(const int64_t* ids, int n, Batch* out, int row_quantum) const {
  int T = 1;
  for (int i = 0; i < n; ++i)
    T = std::max<int>(T, int(offsets_[size_t(ids[i]) + 1] - offsets_[size_t(ids[i])]));
  const int B = PaddedRows(n, row_quantum);
  out->batch = B;
  out->steps = T;
  out->inputs.assign(size_t(B) * T, end_id_);
  out->targets.assign(size_t(B) * T, end_id_);
  out->weights.assign(size_t(B) * T, 0.0f);
  // Padding (weight 0, target <n>) gets the one-id range of <n>: its loss
  // and gradient are 0 either way, and a one-id range costs the ranged dense
  // and clip paths nothing (the whole vocabulary cost V logits per row:
  // bench/dp_speed_field.sh, clip dense 6.8 -> 8.4 ms per step with 3% of
  // rows padded).
  out->legal_lo.assign(ranges_.table ? size_t(B) * T : 0, end_id_);
  out->legal_hi.assign(ranges_.table ? size_t(B) * T : 0, end_id_ + 1);
  for (int i = 0; i < n; ++i) {
    const int32_t* rec = tokens_.data() + offsets_[size_t(ids[i])];
    int len = int(offsets_[size_t(ids[i]) + 1] - offsets_[size_t(ids[i])]);
    int32_t* in = out->inputs.data() + size_t(i) * T;
    int32_t* tg = out->targets.data() + size_t(i) * T;
    float* w = out->weights.data() + size_t(i) * T;
    in[0] = end_id_;
    for (int t = 0; t < len; ++t) {
      if (t + 1 < T) in[t + 1] = rec[t];
      tg[t] = rec[t];
      w[t] = 1.0f;
    }
    if (ranges_.table)
      ranges_.Fill(offsets_[size_t(ids[i])], len, out->legal_lo.data() + size_t(i) * T,
                   out->legal_hi.data() + size_t(i) * T);
  }
}

}  // namespace ds
