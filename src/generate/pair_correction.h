// Pair correction tables: the 2-way part of the marginal calibration
// (train/calibrate.h), applied in generation by the field filter.
//
// A table belongs to a child column b and an earlier parent column a (a < b,
// the generation order). Both columns' first-token ids (a category; a numeric
// column's bin or missing spelling; a datetime's year: the "cells") are split
// into contiguous groups, rows for a and cols for b:
//   row(id_a) = (id_a - plo) * rows / (phi - plo),
//   col(id_b) = (id_b - lo) * cols / (hi - lo),
// or, when the table carries them, by explicit maps row_of[id_a - plo] and
// col_of[id_b - lo] (any partition of the ids; the calibration groups the
// cells by their measured mass, train/calibrate.h MassGroups).
// At b's first position, given the record's earlier first token id_a of a,
// generation adds w[row(id_a) * cols + col(id_b)] to the logit of every
// legal id_b in [lo, hi) (before the temperature). Records whose a has no
// first token in [plo, phi) get no correction.
//
// pair_tables.bin (little-endian; written by train, read by LoadModel, bound
// to model_params.json by its CRC-32 like copy_guard.bin):
//   "DSPAIRT1" magic (8 bytes), u32 version (2; 1 is read too), u32 count
//   count x { u32 child, parent, lo, hi, plo, phi, rows, cols;
//             version 2: u32 maps (bit 0: row_of follows, bit 1: col_of follows),
//               u32 row_of[phi - plo] if bit 0, u32 col_of[hi - lo] if bit 1;
//             f32 w[rows * cols] }
//   u32 CRC-32 of everything before it
// Parse checks sizes, order, groups and finite weights; Check binds the
// ranges to the model's tokenizer.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tokenize/field_tokenizer.h"
#include "util/status.h"

namespace ds {

inline constexpr const char* kPairTablesFile = "pair_tables.bin";

struct PairTable {
  int child = 0, parent = 0;  // column indices, parent < child
  int lo = 0, hi = 0;         // child's first-token ids [lo, hi)
  int plo = 0, phi = 0;       // parent's first-token ids [plo, phi)
  int rows = 1, cols = 1;     // groups of the parent's / child's ids
  std::vector<float> w;       // [rows * cols] logit offsets
  std::vector<int32_t> row_of, col_of;  // optional group of each id ([phi - plo], [hi - lo])
  int Row(int32_t parent_id) const {
    if (!row_of.empty()) return row_of[size_t(parent_id - plo)];
    return int(int64_t(parent_id - plo) * rows / (phi - plo));
  }
  int Col(int32_t child_id) const {
    if (!col_of.empty()) return col_of[size_t(child_id - lo)];
    return int(int64_t(child_id - lo) * cols / (hi - lo));
  }
};

class PairTables {
 public:
  static constexpr int kMaxTables = 4096;
  static constexpr int kMaxGroups = 4096;
  static constexpr float kMaxWeight = 64.0f;

  std::vector<PairTable> tables;

  std::string Serialize() const;
  Status Save(const std::string& dir) const;  // dir/pair_tables.bin, atomically
  // Untrusted input: errors are kCorrupt naming `source`.
  static Result<std::shared_ptr<const PairTables>> Parse(std::string_view bytes,
                                                         const std::string& source);
  // Every table's ranges are its columns' first-token ranges in `tok`.
  Status Check(const FieldTokenizer& tok, const std::string& source) const;
};

// The ids [lo, hi) of column `col`'s first token in `tok` (empty when the
// column has no tokens).
void FirstTokenRange(const FieldTokenizer& tok, int col, int* lo, int* hi);

}  // namespace ds
