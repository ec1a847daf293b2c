// datasynth schema: writes a public-schema TEMPLATE read off a CSV file, for
// the user to review and edit before a --dp run (schema/public_schema.h). The
// template is NOT private: it lists the categories and bounds of the data.
// With --private --epsilon E it writes a schema derived under (E, delta)-DP
// instead (schema/private_schema.h), which a --dp run may use as it is.
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>

#include "cli.h"
#include "io/csv.h"
#include "privacy/secure_noise.h"
#include "schema/private_schema.h"
#include "schema/public_schema.h"
#include "train/dataset.h"
#include "util/fs.h"

namespace ds::cli {
namespace {

struct SchemaArgs {
  std::string input, output, delimiter, field_types;
  bool overwrite = false;
  bool private_ = false;  // --private
  double epsilon = 0, delta = 0;
};

// The template (read off the data) or the privately derived schema, with its note.
Result<nlohmann::json> BuildSchema(const SchemaArgs& a, const InputData& in,
                                   const std::map<std::string, std::string>& types) {
  if (!a.private_) {
    DS_ASSIGN_OR_RETURN(PublicSchema s, SchemaTemplate(in.header, in.records, types));
    nlohmann::json j = PublicSchemaToJson(s);
    j["note"] =
        "TEMPLATE read from " + a.input +
        " (NOT private: it lists the data's categories and rounded bounds). Review it and "
        "replace what only the data could tell by public knowledge before using it with --dp.";
    return j;
  }
  PrivateSchemaOptions o;
  o.epsilon = a.epsilon;
  o.delta = a.delta > 0 ? a.delta : 1.0 / double(std::max<size_t>(in.records.size(), 2));
  o.field_types = types;
  SecureGaussian noise = SecureGaussian::FromOsEntropy();
  PrivateSchemaReport rep;
  DS_ASSIGN_OR_RETURN(PublicSchema s,
                      DerivePrivateSchema(in.header, in.records, o, &noise, &rep));
  s.derived_epsilon = rep.epsilon;
  s.derived_delta = rep.delta;
  std::fprintf(stderr, "%s\n", rep.Describe().c_str());
  for (const auto& n : rep.notes) std::fprintf(stderr, "  %s\n", n.c_str());
  nlohmann::json j = PublicSchemaToJson(s);
  j["note"] = fmt::format(
      "derived from {} under ({:.4g}, {:.3g})-differential privacy; a --dp run on it spends "
      "its own budget besides (the epsilons and deltas add up). Text columns use printable "
      "ASCII: records with other characters are left out of training (add them to "
      "'alphabet' if they are public knowledge).",
      a.input, rep.epsilon, rep.delta);
  return j;
}

int RunSchema(const SchemaArgs& a) {
  const std::string& input = a.input;
  const std::string& output = a.output;
  std::string delimiter = a.delimiter;
  const bool overwrite = a.overwrite;
  if (a.private_ != (a.epsilon > 0) || (!a.private_ && a.delta != 0))
    return Fail(DS_ERR(kInvalidArgument, "{}",
                       a.private_ ? "--private needs --epsilon E (> 0)"
                                  : "--epsilon and --delta need --private"));
  if (!output.empty() && output != "-") {  // before reading: nothing to lose yet
    if (output == input)
      return Fail(DS_ERR(kInvalidArgument, "--output {}: is the input file", output));
    if (!overwrite && PathExists(output))
      return Fail(DS_ERR(kAlreadyExists, "{}: already exists; pass --overwrite to replace it",
                         output));
  }
  Config cfg;
  if (delimiter.empty()) {
    DefaultDelimiterFromName(input, &cfg, true);
    delimiter = cfg.field_delimiter.empty() ? "," : cfg.field_delimiter;
  }
  auto delim = ParseDelimiter(delimiter);
  if (!delim.ok()) return Fail(delim.status().WithContext("--field-delimiter"));
  auto types = ParseFieldTypes(a.field_types);
  if (!types.ok()) return Fail(types.status());
  auto in = ReadInput(input, *delim, 0);
  if (!in.ok()) return Fail(in.status());
  auto j = BuildSchema(a, *in, *types);
  if (!j.ok()) return Fail(j.status().WithContext(input));
  const std::string text = j->dump(1) + "\n";
  if (output.empty() || output == "-") {
    std::fwrite(text.data(), 1, text.size(), stdout);
  } else {
    Status st = WriteFileAtomic(output, text);
    if (!st.ok()) return Fail(st);
    std::fprintf(stderr, "wrote %s: %zu columns (%s)\n", output.c_str(), in->header.size(),
                 a.private_ ? "derived under differential privacy"
                            : "a template read from the data: NOT private");
  }
  return 0;
}

}  // namespace

void AddSchemaCommand(CLI::App& app) {
  static SchemaArgs a;
  CLI::App* cmd = app.add_subcommand(
      "schema",
      "Write a public-schema template from a CSV file (NOT private; review it), or with "
      "--private a schema derived under differential privacy");
  cmd->add_option("--input,-i", a.input, "CSV file")->required();
  cmd->add_option("--output,-o", a.output, "schema JSON to write (default: stdout)");
  cmd->add_option("--field-delimiter", a.delimiter,
                  "CSV delimiter (default from the name, else ,)");
  cmd->add_option("--field-types", a.field_types,
                  "type overrides: col=type;col2=type (with --private: public type choices)");
  cmd->add_flag("--private", a.private_,
                "derive the schema under (epsilon, delta)-DP (noisy histograms) instead");
  cmd->add_option("--epsilon", a.epsilon, "with --private: the privacy budget it spends (> 0)");
  cmd->add_option("--delta", a.delta, "with --private: its delta (default 1 / records)");
  cmd->add_flag("--overwrite", a.overwrite, "replace an existing --output file");
  cmd->callback([] { throw CLI::RuntimeError(RunSchema(a)); });
}

}  // namespace ds::cli
