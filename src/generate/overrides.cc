#include "generate/overrides.h"

namespace ds {

GenerationOverrides GenerationOverrides::FromConfig(const Config& c) {
  GenerationOverrides o;
  if (c.IsExplicit("gen_lines")) o.num_lines = c.gen_lines;
  if (c.IsExplicit("gen_chars")) o.gen_chars = c.gen_chars;
  if (c.IsExplicit("max_invalid")) o.max_invalid = c.max_invalid;
  if (c.IsExplicit("gen_temp")) o.gen_temp = c.gen_temp;
  if (c.IsExplicit("predict_batch_size")) o.predict_batch_size = c.predict_batch_size;
  o.seed = uint64_t(c.seed);
  return o;
}

}  // namespace ds
