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

#include "generate/sampler.h"
#include "tokenize/field_tokenizer.h"

namespace ds {

// `tok` must outlive the filter.
std::unique_ptr<TokenFilter> NewFieldFilter(const FieldTokenizer& tok, int slots);

}  // namespace ds
