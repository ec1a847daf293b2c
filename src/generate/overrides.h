// Generation settings a caller gives on top of the model's own (CLI flags, Python
// arguments): each is read from the config key table, so its range and message are
// the table's ("config key 'gen_lines': value -1 out of range ..."), and a setting
// not given stays unset (the model's value is used).
//   Config c;  ... c.Set / c.SetJson for what the user gave ...
//   GenerationOverrides o = GenerationOverrides::FromConfig(c);
//   o.ApplyTo(&command);  command.run.gen.seed = o.seed;   // GenerateCommand
//   o.ApplyTo(&options);  options.seed = o.seed;           // TabularGenerateOptions
#pragma once

#include <cstdint>
#include <optional>

#include "config/config.h"

namespace ds {

struct GenerationOverrides {
  std::optional<int64_t> num_lines, gen_chars, max_invalid;
  std::optional<double> gen_temp;
  std::optional<int> predict_batch_size;
  uint64_t seed = 0;  // 0: the model's training seed

  // The keys gen_lines, gen_chars, max_invalid, gen_temp, predict_batch_size that
  // were set explicitly in c, and c's seed.
  static GenerationOverrides FromConfig(const Config& c);

  // Copies the optional settings into any options struct with the same members
  // (GenerateCommand, TabularGenerateOptions); the seed lives in different places.
  template <typename Options>
  void ApplyTo(Options* o) const {
    o->num_lines = num_lines;
    o->gen_chars = gen_chars;
    o->max_invalid = max_invalid;
    o->gen_temp = gen_temp;
    o->predict_batch_size = predict_batch_size;
  }
};

}  // namespace ds
