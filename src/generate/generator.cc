#include "generate/generator.h"

#include <algorithm>
#include <cmath>

namespace ds {

namespace {

std::string Show(const std::string& s) {
  if (s.size() <= 60) return "'" + s + "'";
  return "'" + s.substr(0, 57) + "...'";
}

}  // namespace

Result<std::vector<std::vector<int32_t>>> EncodeStartStrings(
    const Tokenizer& tok, char delimiter, const std::vector<std::string>& strings,
    const std::string& source, std::vector<std::vector<std::string>>* fields_out) {
  std::vector<std::vector<int32_t>> out;
  out.reserve(strings.size());
  for (size_t i = 0; i < strings.size(); ++i) {
    const std::string& s = strings[i];
    std::vector<int32_t> ids;
    Status st;
    if (delimiter) {
      if (s.empty() || s.back() != delimiter)
        return DS_ERR(kInvalidArgument,
                      "{}:{}: start string {} must end with the field delimiter '{}' (complete "
                      "fields only, e.g. \"a{}b{}\")",
                      source, i + 1, Show(s), delimiter, delimiter, delimiter);
      std::vector<std::string> fields;
      size_t start = 0;
      for (size_t k = 0; k < s.size(); ++k) {
        if (s[k] == delimiter) {
          fields.push_back(s.substr(start, k - start));
          start = k + 1;
        }
      }
      st = tok.EncodePrefix(fields, &ids);
      if (fields_out) fields_out->push_back(std::move(fields));
    } else {
      st = tok.EncodeField(s, &ids);
    }
    if (!st.ok())
      return Status(st.code(),
                    fmt::format("{}:{}: start string {}: {}", source, i + 1, Show(s), st.message()),
                    st.file(), st.line());
    out.push_back(std::move(ids));
  }
  if (fields_out) fields_out->resize(out.size());
  return out;
}

namespace {
void ValidateFields(const GenerationModel& model, GeneratedRecord* r) {
  if (model.tokenizer && model.tokenizer->decodes_records()) {
    // Honest validity: every field must be a value of its column's type
    // (known category, number in range at the precision, real date).
    std::string why = model.tokenizer->CheckFields(r->fields);
    if (!why.empty()) {
      r->valid = false;
      r->explain = std::move(why);
    }
    return;
  }
  if (model.delimiter && model.rules) {
    std::string why = model.rules->Validate(r->fields);
    if (!why.empty()) {
      r->valid = false;
      r->explain = std::move(why);
    }
  }
}
}  // namespace

void ValidateRecord(const GenerationModel& model, GeneratedRecord* r) {
  if (!r->valid) return;  // the sampler's own failure stays the explanation
  ValidateFields(model, r);
  if (r->valid && model.copy_guard && model.copy_guard->Copies(r->fields)) {
    r->valid = false;
    r->copy_rejected = true;
    r->explain = fmt::format("{} (seen fewer than {} times); sampled again", kCopyExplain,
                             model.copy_guard->min_count());
  }
}

int64_t ReleaseWindow(int slots, int processes) {
  return std::max<int64_t>(4096, 64 * int64_t(slots) * int64_t(processes));
}

Result<RunPlan> PlanRun(const GenerationModel& model, const GenerateOptions& o, int64_t window) {
  if (!model.tokenizer) return DS_ERR(kInvalidArgument, "generation model without a tokenizer");
  if (!model.make_backend) return DS_ERR(kInvalidArgument, "generation model without a backend");
  if (!(o.temperature > 0) || !std::isfinite(o.temperature))
    return DS_ERR(kInvalidArgument, "gen_temp must be > 0 (got {})", o.temperature);
  if (o.gen_chars < 0) return DS_ERR(kInvalidArgument, "gen_chars must be >= 0");
  if (o.num_lines < 0) return DS_ERR(kInvalidArgument, "num_lines must be >= 0");
  if (o.max_invalid < 0) return DS_ERR(kInvalidArgument, "max_invalid must be >= 0");
  if (o.predict_batch_size < 1) return DS_ERR(kInvalidArgument, "predict_batch_size must be >= 1");
  if (o.start_string && !o.prefixes.empty())
    return DS_ERR(kInvalidArgument, "give either a start string or a list of start strings");
  RunPlan plan;
  plan.sampler.seed = o.seed;
  plan.sampler.temperature = o.temperature;
  plan.sampler.gen_chars = o.gen_chars;
  plan.sampler.max_tokens = o.max_tokens;
  plan.sampler.delimiter = model.delimiter;
  // A record tokenizer may decode a prefix value otherwise (a rare category,
  // pooled into <other>): the sampler writes the given values back.
  auto* fields = model.tokenizer->decodes_records() ? &plan.prefix_fields : nullptr;
  if (o.start_string) {
    DS_ASSIGN_OR_RETURN(plan.prefixes, EncodeStartStrings(*model.tokenizer, model.delimiter,
                                                          {*o.start_string}, "start string",
                                                          fields));
    plan.schedule.count_prefix = 0;
  } else if (!o.prefixes.empty()) {
    DS_ASSIGN_OR_RETURN(plan.prefixes, EncodeStartStrings(*model.tokenizer, model.delimiter,
                                                          o.prefixes, o.prefixes_source, fields));
    plan.schedule.num_prefixes = int64_t(o.prefixes.size());
  }
  plan.schedule.target = o.num_lines;
  plan.schedule.max_invalid = o.max_invalid;
  plan.schedule.window = window;
  plan.schedule.first = o.first_attempt;
  plan.schedule.end = o.end_attempt;
  return plan;
}

Result<std::unique_ptr<RecordGenerator>> RecordGenerator::Create(const GenerationModel& model,
                                                                 const GenerateOptions& options) {
  std::unique_ptr<RecordGenerator> g(new RecordGenerator());
  g->model_ = &model;
  DS_ASSIGN_OR_RETURN(RunPlan plan,
                      PlanRun(model, options, ReleaseWindow(options.predict_batch_size, 1)));
  DS_ASSIGN_OR_RETURN(g->backend_, model.make_backend(options.predict_batch_size));
  if (g->backend_->spec().vocab_size != model.tokenizer->vocab_size())
    return DS_ERR(kInvalidArgument, "backend vocabulary {} != tokenizer vocabulary {}",
                  g->backend_->spec().vocab_size, model.tokenizer->vocab_size());
  TokenFilter* filter = options.filter;
  if (!filter && model.make_filter) {
    DS_ASSIGN_OR_RETURN(g->filter_, model.make_filter(options.predict_batch_size));
    filter = g->filter_.get();
  }
  g->sampler_ = std::make_unique<BatchSampler>(*model.tokenizer, *g->backend_, plan.sampler,
                                               std::move(plan.prefixes), filter,
                                               std::move(plan.prefix_fields));
  g->sched_ = std::make_unique<AttemptScheduler>(plan.schedule);
  return g;
}

Result<bool> RecordGenerator::Next(GeneratedRecord* record) {
  try {
    while (true) {
      if (!sched_->status().ok()) return sched_->status();
      if (sched_->Pop(record)) return true;
      if (sched_->finished()) return false;
      // Keep the queue one batch deep so freed slots restart at once.
      int64_t room =
          int64_t(sampler_->slots()) * 2 - sampler_->active() - int64_t(sampler_->queued());
      if (room > 0) {
        tasks_.clear();
        sched_->Issue(room, &tasks_);
        for (const auto& t : tasks_) sampler_->Submit(t);
      }
      if (sampler_->idle()) return DS_ERR(kInternal, "generation stalled (no attempt in flight)");
      done_.clear();
      sampler_->Step(&done_);
      for (auto& r : done_) {
        ValidateRecord(*model_, &r);
        sched_->Complete(std::move(r));
      }
    }
  } catch (const Error& e) {
    return e.status();
  } catch (const std::bad_alloc&) {
    return DS_ERR(kResourceExhausted, "out of memory");
  }
}

}  // namespace ds
