// datasynth schema: writes a public-schema TEMPLATE read off a CSV file, for
// the user to review and edit before a --dp run (schema/public_schema.h). The
// template is NOT private: it lists the categories and bounds of the data.
#include <cstdio>

#include "cli.h"
#include "io/csv.h"
#include "schema/public_schema.h"
#include "train/dataset.h"
#include "util/fs.h"

namespace ds::cli {
namespace {

int RunSchema(const std::string& input, const std::string& output, std::string delimiter,
              const std::string& field_types, bool overwrite) {
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
  auto types = ParseFieldTypes(field_types);
  if (!types.ok()) return Fail(types.status());
  auto in = ReadInput(input, *delim, 0);
  if (!in.ok()) return Fail(in.status());
  auto s = SchemaTemplate(in->header, in->records, *types);
  if (!s.ok()) return Fail(s.status().WithContext(input));
  nlohmann::json j = PublicSchemaToJson(*s);
  j["note"] =
      "TEMPLATE read from " + input +
      " (NOT private: it lists the data's categories and rounded bounds). Review it and replace "
      "what only the data could tell by public knowledge before using it with --dp.";
  const std::string text = j.dump(1) + "\n";
  if (output.empty() || output == "-") {
    std::fwrite(text.data(), 1, text.size(), stdout);
  } else {
    Status st = WriteFileAtomic(output, text);
    if (!st.ok()) return Fail(st);
    std::fprintf(stderr, "wrote %s: %zu columns (a template read from the data: NOT private)\n",
                 output.c_str(), s->columns.size());
  }
  return 0;
}

}  // namespace

void AddSchemaCommand(CLI::App& app) {
  static std::string input, output, delimiter, field_types;
  static bool overwrite = false;
  CLI::App* cmd = app.add_subcommand(
      "schema", "Write a public-schema template from a CSV file (NOT private; review it)");
  cmd->add_option("--input,-i", input, "CSV file")->required();
  cmd->add_option("--output,-o", output, "schema JSON to write (default: stdout)");
  cmd->add_option("--field-delimiter", delimiter, "CSV delimiter (default from the name, else ,)");
  cmd->add_option("--field-types", field_types, "type overrides: col=type;col2=type");
  cmd->add_flag("--overwrite", overwrite, "replace an existing --output file");
  cmd->callback([] {
    throw CLI::RuntimeError(RunSchema(input, output, delimiter, field_types, overwrite));
  });
}

}  // namespace ds::cli
