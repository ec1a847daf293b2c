// Constrained decoding for the field tokenizer: a TokenFilter that lets the
// sampler emit only the tokens legal at each position of a record
// (FieldTokenizer::Mask): the current column's current part, digits that keep
// the value inside its bin, days that exist in the month, <eof> at legal text
// lengths, <n> only after the last column. Forced tokens (prefixes, seed
// fields) go through Accept like sampled ones; a forced token that is not
// legal leaves the rest of that record unconstrained (its decoding then
// reports why the record is invalid).
#pragma once

#include <memory>

#include "generate/pair_correction.h"
#include "generate/sampler.h"
#include "tokenize/field_tokenizer.h"

namespace ds {

// `tok` must outlive the filter. `pairs` (may be null): the calibration's
// pair correction tables (generate/pair_correction.h), added to the logits
// of each child column's first token given the record's parent value; the
// tables must pass PairTables::Check for `tok` and not change while the
// filter is in use. ranges_only: sample inside each position's part range
// (FieldTokenizer::AllowedRange) and nothing finer, for --constrain none on
// a model trained with the legal-ids loss, whose logits outside those ranges
// were never trained (sampling them gave 0% valid records).
std::unique_ptr<TokenFilter> NewFieldFilter(const FieldTokenizer& tok, int slots,
                                            std::shared_ptr<const PairTables> pairs = nullptr,
                                            bool ranges_only = false);

}  // namespace ds
