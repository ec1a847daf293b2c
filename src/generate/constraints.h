// Constrained decoding for delimited records: records valid by construction.
//
// At every sampling step the filter gives probability zero (logit -inf, the
// sampler renormalises) to each token that cannot continue a record that
// passes the column rules, so no record has to be rejected afterwards and the
// sampled distribution is the model's, conditioned on validity (no rejection
// bias: rows that the network finds hard to spell are repaired token by token
// instead of being thrown away).
//
// Record automaton, one state per slot:
//   field  -1 before the first field (column markers: only <col0> allowed),
//          then 0..K-1 (K = columns).
//   field separator: <col{k+1}> (markers) or <d> (no markers) ends field k <
//          K-1; <n> ends field K-1 and the record. A separator is allowed
//          only when the current field is complete (accepting); no other
//          special token is ever allowed. The allowed separator takes the
//          probability of EVERY end-of-field token (<d>, any <colK>, <n>;
//          summed at the sampling temperature): the network's choice to end
//          the field is kept even when it spells the wrong marker (it lost
//          count of repeated fields, e.g. telco's six "No internet service")
//          or <n> too early. Masking those out instead leaves the field to
//          run on into garbage. When the field cannot end yet, their
//          probability goes to the allowed text tokens (renormalisation).
//   field state by column kind:
//     text      any text token; the field may end when it is non-empty, or
//               empty and empty_allowed.
//     category  a position in a byte trie of the categories and the missing
//               spellings ("NA"); a text token is allowed when its whole
//               text walks the trie from the position to a node from which a
//               category can still be completed with the vocabulary's tokens
//               (precomputed per trie node: the allowed tokens and their
//               target nodes). The field may end at a category's last byte.
//     number    the number grammar below, plus the trie of missing spellings.
//   The empty field is allowed only when empty_allowed.
//
// Number grammar (the syntax of ParseRuleInteger / ParseRuleDecimal):
//   [sign] (0 | [1-9][0-9]{0,17}) [. [0-9]{1,D}]      D = max_decimals
//   [sign] . [0-9]{1,D}                               (decimals only)
//   max_decimals = -1 (exponents were seen): [eE][+-]?[0-9]{1,2} may follow
//   and the fraction has at most 18 digits.
// Range (level values, when the rule has one): with values scaled by
// S = 10^D to integers and bounds A = ceil(min S), B = floor(max S) (exact
// decimal arithmetic on the shortest representation of the stored doubles),
// a prefix is allowed when SOME completion lies in [A, B]:
//   int part v with n digits, extended by k more digits (n + k <= 18):
//     [v 10^k S, (v 10^k + 10^k - 1) S + S - 1]  (the fraction fills the rest)
//   after the point with f fraction digits F:  [vS + F u, vS + F u + u - 1],
//     u = 10^(D - f)
// and the field may end only on a value inside [A, B]. A minus sign is
// allowed only when min < 0, '+' never (structure level: both). When the
// vocabulary lacks some digits, the completion check searches digit by digit
// (bounded; on overflow it assumes the prefix is live). Ranges of columns
// with exponents (or more than 18 decimals) cannot be enforced token by token:
// they are listed in unenforced() and left to ColumnRules::Validate, whose
// explanation still names them.
//
// Levels:
//   none       no filter.
//   structure  field count and order, end of record after the last field,
//              empty fields only where empty_allowed, and the number syntax
//              (sign, digits, decimal places): everything the rules keep
//              without storing data values (what --dp keeps).
//   values     structure plus category sets and numeric ranges.
//   auto       values when the rules hold values (a category set or a range),
//              else structure.
// ColumnRules::checks() switched off also switch the matching constraint off
// (type: numbers become text, category, range, empty).
//
// Tokenizers: works on token texts (Tokenizer::text), so a char tokenizer (one
// code point per token) and SentencePiece (multi-byte pieces, checked byte by
// byte against the trie / number grammar) are handled alike. Cost per step:
// text fields touch only the special ids; category fields copy the node's
// precomputed allowed list; number fields simulate each candidate token (the
// text tokens made only of number characters: ~13 for a char tokenizer).
//
// Forced tokens (start strings, seed fields) go through Accept like sampled
// ones: a forced field that breaks its rule leaves that field unconstrained
// up to its separator (ColumnRules::Validate then explains the record); a
// forced record shape that the automaton cannot follow switches the filter
// off for the rest of that record.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "generate/sampler.h"
#include "schema/column_rules.h"
#include "tokenize/tokenizer.h"
#include "util/status.h"

namespace ds {

enum class ConstraintLevel { kAuto, kNone, kStructure, kValues };

// "auto" | "none" | "structure" | "values".
Result<ConstraintLevel> ParseConstraintLevel(std::string_view name);
const char* ConstraintLevelName(ConstraintLevel level);
// True when some column keeps a category set or a numeric range.
bool RulesHoldValues(const ColumnRules& rules);
// kAuto -> kValues when RulesHoldValues, else kStructure; others unchanged.
ConstraintLevel ResolveConstraintLevel(ConstraintLevel level, const ColumnRules& rules);

// The precomputed, immutable tables of one (tokenizer, rules, level): shared
// by every filter (slot states) made from them, in any number of processes.
class RecordConstraints {
 public:
  virtual ~RecordConstraints() = default;
  // `tok` must outlive the result. Errors: a tokenizer without record
  // structure (no <d> and no markers), markers for a different column count.
  // level kNone is an error here (no tables to build).
  static Result<std::shared_ptr<const RecordConstraints>> Build(const Tokenizer& tok,
                                                                const ColumnRules& rules,
                                                                ConstraintLevel level);
  virtual ConstraintLevel level() const = 0;  // resolved (never kAuto)
  // Rules that are checked only after sampling ("field 3 'x': range ... ").
  virtual const std::vector<std::string>& unenforced() const = 0;
  // One line per column: what is enforced while sampling.
  virtual std::string Describe() const = 0;
};

// A TokenFilter with `slots` slot states over shared tables.
std::unique_ptr<TokenFilter> NewConstraintFilter(std::shared_ptr<const RecordConstraints> tables,
                                                 int slots);

// Build + NewConstraintFilter. level kNone (or rules with no column) gives a
// null filter.
Result<std::unique_ptr<TokenFilter>> MakeRecordConstraints(const Tokenizer& tok,
                                                           const ColumnRules& rules,
                                                           ConstraintLevel level, int slots);

}  // namespace ds
