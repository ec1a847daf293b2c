#!/usr/bin/env bash
# Bad-input matrix (issue #7 item 1), end to end through the real CLI: every case is a
# generated bad file under a temp dir given to `datasynth train`, `info` or `generate`.
# Each error case asserts: non-zero exit (2 for bad input, 1 for I/O errors and out of
# memory), exactly
# one "datasynth: error:" line holding the expected text (file, line and field where
# relevant), and that nothing which looks complete is left behind (no
# model_params.json in a new model dir, no output file). Cases with documented
# handling that is not an error assert that handling. The table of cases is in
# docs/reliability.md; keep the two in step.
set -uo pipefail
source "$(dirname "$0")/lib.sh"
CASE_TIMEOUT=${CASE_TIMEOUT:-120}  # every case runs under timeout: a hang is a failure
dst() { timeout "$CASE_TIMEOUT" "$DS" "$@"; }  # the CLI under the case timeout

# Tiny network: each training run takes a second or two.
NET=(--epochs 1 --embedding-dim 8 --rnn-units 16 --batch-size 4 --seq-length 16 --threads 1)
SMALL=("${NET[@]}" --tokenizer char --seed 5)
CSV=(--field-delimiter ,)

# expect_error NAME WANT_RC SUBSTRING LEFTOVER -- ARGS...
#   LEFTOVER: a model dir that must not hold model_params.json, or a file that must
#   not exist afterwards ("" for none).
expect_error() {
  local name=$1 want_rc=$2 want=$3 left=$4
  shift 5
  local out rc
  out=$(timeout -k 5 "$CASE_TIMEOUT" "$DS" "$@" 2>&1 >/dev/null)
  rc=$?
  if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then fail "$name: no answer within ${CASE_TIMEOUT}s (hang)"; return; fi
  if [ $rc -eq 0 ]; then fail "$name: exit 0"; return; fi
  if [ "$want_rc" != any ] && [ $rc -ne "$want_rc" ]; then fail "$name: exit $rc, want $want_rc: $out"; return; fi
  if ! grep -qF -- "$want" <<<"$out"; then fail "$name: message '$out' lacks '$want'"; return; fi
  if [ "$(grep -c "datasynth: error:" <<<"$out")" -ne 1 ]; then fail "$name: not exactly one error line: $out"; return; fi
  if [ -n "$left" ] && { [ -e "$left/model_params.json" ] || [ -f "$left" ]; }; then
    fail "$name: left $left behind"; return
  fi
  pass "$name ($(grep "datasynth: error:" <<<"$out" | cut -c1-160))"
}
train_error() {  # train_error NAME SUBSTRING INPUT [extra args]: a CSV train that must fail
  local name=$1 want=$2 input=$3
  shift 3
  expect_error "$name" 2 "$want" "$TMP/m_$name" -- train --input "$input" "${CSV[@]}" \
    --model-dir "$TMP/m_$name" "${SMALL[@]}" "$@"
  [ -e "$TMP/m_$name" ] && fail "$name: created the model directory and left it" || true
}

py() { python3 - "$@"; }

# A valid base table: 60 rows, 3 columns.
py "$TMP/good.csv" <<'EOF'
import sys
with open(sys.argv[1], "w") as f:
    f.write("name,age,city\n")
    for i in range(60):
        f.write(f"n{i % 7},{20 + i % 30},{['Oslo', 'Rome', 'Lima'][i % 3]}\n")
EOF

# ============================ CSV / text input ============================
printf 'a,b\n1,2\n3,"open\n4,5\n6,7\n' > "$TMP/quote.csv"
train_error quote "quote.csv:3: field 2 'b': unbalanced quote" "$TMP/quote.csv"
printf 'a,b\n1,2\n"x"y,3\n' > "$TMP/afterquote.csv"
train_error after_quote "afterquote.csv:3: field 1 'a'" "$TMP/afterquote.csv"

{ head -n 20 "$TMP/good.csv"; echo "only,two"; tail -n 5 "$TMP/good.csv"; } > "$TMP/ragged.csv"
train_error ragged "ragged.csv:21: expected 3 fields (as in the header), found 2" "$TMP/ragged.csv"
{ head -n 10 "$TMP/good.csv"; echo "a,b,c,d"; } > "$TMP/ragged_long.csv"
train_error ragged_long "ragged_long.csv:11: expected 3 fields (as in the header), found 4" "$TMP/ragged_long.csv"

{ head -n 5 "$TMP/good.csv"; printf 'n1,2\0003,Oslo\n'; } > "$TMP/nul.csv"
train_error nul "nul.csv:6: field 2 'age': NUL byte (binary file?)" "$TMP/nul.csv"

{ head -n 5 "$TMP/good.csv"; printf 'n1,22,Z\xfcrich\n'; } > "$TMP/latin1.csv"
train_error invalid_utf8 "latin1.csv:6: field 3 'city': invalid UTF-8 at byte 1 of the field" "$TMP/latin1.csv"
printf 'ok line\nbad \xc3\x28 line\n' > "$TMP/latin1.txt"
expect_error invalid_utf8_text 2 "latin1.txt:2: invalid UTF-8 at byte 4 of the line" "$TMP/m_utf8txt" -- \
  train --input "$TMP/latin1.txt" --model-dir "$TMP/m_utf8txt" "${SMALL[@]}"

# 10 MB field: within the reader's 16 MiB field limit. SentencePiece refuses
# records longer than max_line_len; a field over 16 MiB is a reader error naming
# the line and field.
py "$TMP/bigfield.csv" "$TMP/hugefield.csv" <<'EOF'
import sys
for path, n in ((sys.argv[1], 10 << 20), (sys.argv[2], (16 << 20) + 1)):
    with open(path, "w") as f:
        f.write("id,text\n")
        for i in range(30):
            f.write(f"{i},short\n")
        f.write("30," + "x" * n + "\n")
EOF
expect_error field_10mb_sentencepiece 2 "training record 31: 10485763 bytes is longer than max_line_len 2048" \
  "$TMP/m_big" -- train --input "$TMP/bigfield.csv" "${CSV[@]}" --model-dir "$TMP/m_big" \
  --tokenizer sentencepiece --epochs 1 --rnn-units 16 --embedding-dim 8 --vocab-size 30
train_error field_over_16mib "hugefield.csv:32: field 2 'text': field longer than 16777216 bytes" "$TMP/hugefield.csv"

# 10,000 columns: handled (the reader's limit is 100,000 fields per record); with column
# markers the vocabulary holds 10,001 special tokens and every record is >= 20,000 tokens.
py "$TMP/wide.csv" <<'EOF'
import sys
n = 10000
with open(sys.argv[1], "w") as f:
    f.write(",".join(f"c{i}" for i in range(n)) + "\n")
    for r in range(3):
        f.write(",".join(str((i * 7 + r) % 10) for i in range(n)) + "\n")
EOF
if "$DS" train --input "$TMP/wide.csv" "${CSV[@]}" --model-dir "$TMP/m_wide" "${SMALL[@]}" \
     > "$TMP/wide.log" 2>&1 && grep -q "char with 10011 tokens, column markers" "$TMP/wide.log" &&
   "$DS" info --model-dir "$TMP/m_wide" 2>&1 | grep -q "columns      10000"; then
  pass "10000 columns: trains (10011 tokens with column markers), info shows 10000 columns"
else
  fail "10000 columns: $(tail -3 "$TMP/wide.log")"
fi

: > "$TMP/empty.csv"
train_error empty "empty.csv: empty file (no header row)" "$TMP/empty.csv"
printf '\n\n\r\n' > "$TMP/blank.csv"
train_error blank_lines_only "blank.csv: empty file (no header row)" "$TMP/blank.csv"
: > "$TMP/empty.txt"
expect_error empty_text 2 "empty.txt: empty input, no records" "$TMP/m_emptytxt" -- \
  train --input "$TMP/empty.txt" --model-dir "$TMP/m_emptytxt" "${SMALL[@]}"
head -n 1 "$TMP/good.csv" > "$TMP/header.csv"
train_error header_only "header.csv: header only, no records to train on" "$TMP/header.csv"
{ echo "name,age,name"; tail -n +2 "$TMP/good.csv"; } > "$TMP/dup.csv"
train_error duplicate_header "dup.csv: duplicate column name 'name' (columns 1 and 3)" "$TMP/dup.csv"
{ echo "name,,city"; tail -n +2 "$TMP/good.csv"; } > "$TMP/emptyname.csv"
train_error empty_header_name "emptyname.csv: column 2 has an empty name" "$TMP/emptyname.csv"

# BOM + CRLF: handled: the BOM is dropped, CRLF ends records, names and values are clean.
{ printf '\xef\xbb\xbf'; sed 's/$/\r/' "$TMP/good.csv"; } > "$TMP/bomcrlf.csv"
if "$DS" train --input "$TMP/bomcrlf.csv" "${CSV[@]}" --model-dir "$TMP/m_bom" "${SMALL[@]}" 2>"$TMP/bom.log" &&
   py "$TMP/m_bom" <<'EOF'
import json, sys
p = json.load(open(sys.argv[1] + "/model_params.json"))["datasynth"]
assert p["header"] == ["name", "age", "city"], p["header"]
assert p["records"] == 60, p["records"]
chars = "".join(json.load(open(sys.argv[1] + "/tokenizer.json"))["char"]["chars"])
assert "\r" not in chars and "\ufeff" not in chars, repr(chars)
EOF
then
  pass "BOM + CRLF: header [name, age, city], 60 records, no CR or BOM in the vocabulary"
else
  fail "BOM + CRLF: $(tail -3 "$TMP/bom.log")"
fi

gzip -c "$TMP/good.csv" > "$TMP/good.csv.gz"
head -c $(( $(stat -c %s "$TMP/good.csv.gz") - 6 )) "$TMP/good.csv.gz" > "$TMP/trunc.csv.gz"
train_error gzip_truncated "trunc.csv.gz: truncated gzip stream" "$TMP/trunc.csv.gz"
{ head -c 40 "$TMP/good.csv.gz"; head -c 100 /dev/zero | tr '\0' 'Z'; } > "$TMP/corrupt.csv.gz"
train_error gzip_corrupt "corrupt.csv.gz: corrupt gzip stream" "$TMP/corrupt.csv.gz"
if "$DS" train --input "$TMP/good.csv.gz" "${CSV[@]}" --model-dir "$TMP/m_gz" "${SMALL[@]}" 2>/dev/null; then
  pass "complete gzip input trains"
else
  fail "complete gzip input does not train"
fi

# A binary file given as text (the datasynth executable) and as CSV (random bytes).
# Detected in the first MiB, before any record is read (issue #13 item 4).
expect_error binary_as_text 2 "binary data, not text" "$TMP/m_bin" -- \
  train --input "$DS" --model-dir "$TMP/m_bin" "${SMALL[@]}"
expect_error binary_as_text_names_file 2 "$(basename "$DS"): binary data" "$TMP/m_bin" -- \
  train --input "$DS" --model-dir "$TMP/m_bin" "${SMALL[@]}"
head -c 65536 /dev/urandom > "$TMP/random.bin"
train_error binary_as_csv "random.bin:" "$TMP/random.bin"

# ============================ config files and flags ============================
cfg_error() {  # cfg_error NAME SUBSTRING JSON
  printf '%s' "$3" > "$TMP/$1.json"
  expect_error "config_$1" 2 "$2" "$TMP/m_cfg_$1" -- train --input "$TMP/good.csv" "${CSV[@]}" \
    --model-dir "$TMP/m_cfg_$1" --config "$TMP/$1.json"
}
cfg_error wrong_type_string "wrong_type_string.json: config key 'epochs': expected an integer, got \"ten\"" '{"epochs": "ten"}'
cfg_error wrong_type_fraction "config key 'batch_size': expected an integer, got 8.5" '{"batch_size": 8.5}'
cfg_error wrong_type_bool "config key 'overwrite': expected true or false, got 1" '{"overwrite": 1}'
cfg_error wrong_type_number "config key 'learning_rate': expected a number, got \"0.01\"" '{"learning_rate": "0.01"}'
cfg_error wrong_type_string_key "config key 'optimizer': expected a string, got 3" '{"optimizer": 3}'
cfg_error unknown_key "unknown_key.json: unknown config key 'epoch'" '{"epoch": 3}'
cfg_error negative_size "config key 'batch_size': value -8 out of range [1, 65536]" '{"batch_size": -8}'
cfg_error negative_epochs "config key 'epochs': value -1 out of range" '{"epochs": -1}'
cfg_error absurd_units "config key 'rnn_units': value 100000000 out of range [1, 65536]" '{"rnn_units": 100000000}'
cfg_error absurd_int "config key 'epochs': value 1e+20 out of range [1, 1000000]" '{"epochs": 1e20}'
cfg_error absurd_seq "config key 'seq_length': value 1000000 out of range" '{"seq_length": 1000000}'
cfg_error bad_enum "config key 'optimizer': 'sgd' is not one of: rmsprop, adam" '{"optimizer": "sgd"}'
cfg_error not_json "not_json.json: not valid JSON" '{"epochs": 1,'
cfg_error not_object "not_object.json: expected a JSON object of config keys" '[1, 2]'
printf '{"field_delimiter": ";;"}' > "$TMP/bad_delim.json"
expect_error config_bad_delimiter 2 "config key 'field_delimiter': invalid delimiter ';;': expected one character" "$TMP/m_cfgdelim" -- \
  train --input "$TMP/good.csv" --model-dir "$TMP/m_cfgdelim" --config "$TMP/bad_delim.json"
expect_error config_missing 2 "nope.json: cannot open config file" "$TMP/m_cfgmiss" -- \
  train --input "$TMP/good.csv" "${CSV[@]}" --model-dir "$TMP/m_cfgmiss" --config "$TMP/nope.json"
expect_error flag_not_integer 2 "config key 'epochs': 'abc' is not an integer" "$TMP/m_flag" -- \
  train --input "$TMP/good.csv" "${CSV[@]}" --model-dir "$TMP/m_flag" --epochs abc
expect_error flag_invalid_utf8 2 "config key 'field_delimiter_token': value is not valid UTF-8" "$TMP/m_flagu" -- \
  train --input "$TMP/good.csv" "${CSV[@]}" --model-dir "$TMP/m_flagu" "${SMALL[@]}" \
  --field-delimiter-token "$(printf '<\xff>')"
# Sizes in range whose network does not fit in memory: a clear out-of-memory error
# (exit 1), not a crash; the address-space limit makes the allocation fail quickly.
# (Not under ASan, which reserves terabytes of address space for its shadow memory.)
if [ -n "${DS_TEST_SANITIZER:-}" ]; then
  echo "skip: absurd in-range sizes (ulimit -v) under $DS_TEST_SANITIZER"
else
out=$( (ulimit -v 4000000; "$DS" train --input "$TMP/good.csv" "${CSV[@]}" --model-dir "$TMP/m_oom" \
        --tokenizer char --epochs 1 --batch-size 4 --seq-length 16 --rnn-units 65536 --embedding-dim 65536) 2>&1 >/dev/null)
rc=$?
if [ $rc -eq 1 ] && grep -qE "datasynth: error: .*(out of memory|needs about .* of memory)" <<<"$out" && [ ! -e "$TMP/m_oom/model_params.json" ]; then
  pass "absurd in-range sizes: out of memory, exit 1, no model ($(grep error: <<<"$out" | cut -c1-160))"
else
  fail "absurd in-range sizes: rc $rc: $out"
fi
fi

# ============================ model directories ============================
M=$TMP/model
"$DS" train --input "$TMP/good.csv" "${CSV[@]}" --model-dir "$M" "${SMALL[@]}" 2>/dev/null ||
  fail "training the base model failed"
"$DS" train --input "$TMP/good.csv" "${CSV[@]}" --model-dir "$TMP/model_seed6" "${NET[@]}" --tokenizer char --seed 6 2>/dev/null
sed 's/Oslo/Oslx/' "$TMP/good.csv" > "$TMP/other.csv"  # same number of distinct characters
"$DS" train --input "$TMP/other.csv" "${CSV[@]}" --model-dir "$TMP/model_other" "${SMALL[@]}" 2>/dev/null
"$DS" train --input "$ROOT/examples/telco_churn_2k.csv" "${CSV[@]}" --model-dir "$TMP/model_telco" \
  "${SMALL[@]}" --max-lines 100 2>/dev/null
wfile() { python3 -c "import json,sys;print(json.load(open(sys.argv[1]+'/model_params.json'))['datasynth']['weights_file'])" "$1"; }
W=$(wfile "$M")
"$DS" generate --model-dir "$M" --num-lines 3 --output "$TMP/ok.csv" --seed 1 >/dev/null 2>&1 &&
  [ -s "$TMP/ok.csv" ] && pass "base model generates" || fail "base model does not generate"

variant() {  # variant NAME: a fresh copy of the base model in $TMP/v_NAME
  rm -rf "$TMP/v_$1"; cp -r "$M" "$TMP/v_$1"; echo "$TMP/v_$1"
}
model_error() {  # model_error NAME SUBSTRING DIR: info and generate both refuse DIR
  expect_error "$1 (info)" 2 "$2" "" -- info --model-dir "$3"
  expect_error "$1 (generate)" 2 "$2" "$TMP/out_$1.csv" -- generate --model-dir "$3" \
    --num-lines 3 --output "$TMP/out_$1.csv" --seed 1
}

d=$(variant trunc); truncate -s 6000 "$d/$W"
model_error weights_truncated "$W: file is 6000 bytes but its header says" "$d"
d=$(variant trunc_header); truncate -s 100 "$d/$W"
model_error weights_truncated_header "$W: truncated weights file (100 bytes, header needs 4096)" "$d"
d=$(variant empty_weights); : > "$d/$W"
model_error weights_empty "$W: truncated weights file (0 bytes" "$d"
d=$(variant flip); py "$d/$W" <<'EOF'
import sys
b = bytearray(open(sys.argv[1], "rb").read()); b[4096 + 100] ^= 0x01; open(sys.argv[1], "wb").write(b)
EOF
model_error weights_corrupted "$W: section 'params' checksum mismatch (file edited or corrupted)" "$d"
d=$(variant hdr); py "$d/$W" <<'EOF'
import sys
b = bytearray(open(sys.argv[1], "rb").read()); b[40] ^= 0x20; open(sys.argv[1], "wb").write(b)
EOF
model_error weights_header_edited "$W: header checksum mismatch" "$d"
# Edited with every checksum inside the file fixed up: only model_params.json's
# checksum can tell (weights from another model of the same shape look the same).
d=$(variant edited); py "$d/$W" <<'EOF'
import struct, sys, zlib
p = sys.argv[1]; b = bytearray(open(p, "rb").read())
off, count = struct.unpack_from("<QQ", b, 32 + 40)
struct.pack_into("<f", b, off, 0.123)
struct.pack_into("<I", b, 32 + 56, zlib.crc32(bytes(b[off:off + 4 * count])))
struct.pack_into("<I", b, 24, 0); struct.pack_into("<I", b, 24, zlib.crc32(bytes(b[:4096])))
open(p, "wb").write(b)
EOF
model_error weights_edited "$W: does not belong to this model_params.json (checksum)" "$d"
d=$(variant foreign_weights); cp "$TMP/model_seed6/$(wfile "$TMP/model_seed6")" "$d/$W"
model_error weights_from_other_model "$W: does not belong to this model_params.json (checksum)" "$d"
d=$(variant wversion); py "$d/$W" <<'EOF'
import struct, sys
b = bytearray(open(sys.argv[1], "rb").read()); struct.pack_into("<I", b, 8, 2); open(sys.argv[1], "wb").write(b)
EOF
model_error weights_format_version "$W: weights format version 2 is not supported (this build reads 1)" "$d"
d=$(variant magic); printf 'NOTMAGIC' | dd of="$d/$W" conv=notrunc 2>/dev/null
model_error weights_not_a_weights_file "$W: not a datasynth weights file (bad magic)" "$d"

edit_params() {  # edit_params DIR PYTHON-STATEMENTS on p (the parsed model_params.json)
  py "$1/model_params.json" "$2" <<'EOF'
import json, sys
p = json.load(open(sys.argv[1])); exec(sys.argv[2]); open(sys.argv[1], "w").write(json.dumps(p))
EOF
}
d=$(variant fversion); edit_params "$d" 'p["datasynth"]["format_version"] = 3'
model_error format_version "model format version 3 is not supported (this build reads 1 to 2)" "$d"
d=$(variant fversion_str); edit_params "$d" 'p["datasynth"]["format_version"] = "1"'
model_error format_version_type "malformed model metadata" "$d"
d=$(variant shape); edit_params "$d" 'p["datasynth"]["network"]["rnn_units"] = 32'
model_error network_shape_edited "section 'params' holds" "$d"
d=$(variant shape_absurd); edit_params "$d" 'p["datasynth"]["network"]["rnn_units"] = 10**9'
model_error network_shape_absurd "network shape out of range" "$d"
d=$(variant params_key); edit_params "$d" 'p["epochs"] = "many"'
model_error params_bad_config_value "model_params.json: config key 'epochs': expected an integer" "$d"
d=$(variant wname); edit_params "$d" 'p["datasynth"]["weights_file"] = "../../etc/passwd"'
model_error weights_name_is_a_path "bad weights_file name '../../etc/passwd'" "$d"
d=$(variant params_trunc); truncate -s 200 "$d/model_params.json"
model_error params_truncated "model_params.json: not valid JSON" "$d"
d=$(variant params_noblock); edit_params "$d" 'del p["datasynth"]'
model_error params_no_datasynth_block "missing 'datasynth' block" "$d"
d=$(variant rules); printf '{"columns": [' > "$d/column_rules.json"
model_error column_rules_corrupted "column_rules.json: not valid JSON" "$d"

d=$(variant noweights); rm "$d/$W"
model_error missing_weights "$W: missing weights file" "$d"
d=$(variant notok); rm "$d/tokenizer.json"
model_error missing_tokenizer "tokenizer.json: no such file" "$d"
d=$(variant noparams); rm "$d/model_params.json"
model_error missing_model_params "not a trained model (no model_params.json)" "$d"
model_error missing_dir "model directory does not exist" "$TMP/no_such_model"

# Tokenizer from another model: a different vocabulary size is caught by the size
# check; the same size (other data) by model_params.json's tokenizer checksum.
d=$(variant tok_telco); cp "$TMP/model_telco/tokenizer.json" "$d/tokenizer.json"
model_error tokenizer_other_model "tokenizer from another model?" "$d"
d=$(variant tok_same_size); cp "$TMP/model_other/tokenizer.json" "$d/tokenizer.json"
if cmp -s "$M/tokenizer.json" "$d/tokenizer.json"; then
  fail "tokenizer_same_size: the two tokenizers are identical (test data)"
else
  model_error tokenizer_other_model_same_size "tokenizer.json: does not belong to this model_params.json" "$d"
fi
d=$(variant tok_garbage); printf '\x00\x01binary' > "$d/tokenizer.json"
model_error tokenizer_garbage "tokenizer.json: not valid JSON" "$d"
d=$(variant tok_version); edit_params "$d" 'pass'
py "$d/tokenizer.json" <<'EOF'
import json, sys
t = json.load(open(sys.argv[1])); t["format_version"] = 9; open(sys.argv[1], "w").write(json.dumps(t))
EOF
model_error tokenizer_format_version "tokenizer.json: format_version 9 is not supported" "$d"

# SentencePiece: tokenizer.model is bound to tokenizer.json by size and CRC-32.
SP=$TMP/model_sp
"$DS" train --input "$TMP/good.csv" "${CSV[@]}" --model-dir "$SP" "${NET[@]}" --tokenizer sentencepiece \
  --vocab-size 40 2>/dev/null || fail "training the SentencePiece model failed"
"$DS" train --input "$TMP/other.csv" "${CSV[@]}" --model-dir "$TMP/model_sp2" "${NET[@]}" \
  --tokenizer sentencepiece --vocab-size 40 2>/dev/null
rm -rf "$TMP/v_spmodel"; cp -r "$SP" "$TMP/v_spmodel"
cp "$TMP/model_sp2/tokenizer.model" "$TMP/v_spmodel/tokenizer.model"
model_error sp_model_from_other_model "tokenizer.model: does not match tokenizer.json" "$TMP/v_spmodel"
rm -rf "$TMP/v_sptrunc"; cp -r "$SP" "$TMP/v_sptrunc"; truncate -s 50 "$TMP/v_sptrunc/tokenizer.model"
model_error sp_model_truncated "tokenizer.model: does not match tokenizer.json (size 50" "$TMP/v_sptrunc"
rm -rf "$TMP/v_spmissing"; cp -r "$SP" "$TMP/v_spmissing"; rm "$TMP/v_spmissing/tokenizer.model"
model_error sp_model_missing "tokenizer.model: no such file" "$TMP/v_spmissing"

# A model directory given as training input, and an input given as model directory.
expect_error model_dir_as_input 1 "model: is a directory, not a file" "$TMP/m_dirin" -- \
  train --input "$M" "${CSV[@]}" --model-dir "$TMP/m_dirin" "${SMALL[@]}"
model_error file_as_model_dir "not a trained model" "$TMP/good.csv"

# ============ output safety (issue #13 item 3): nothing replaced, nothing followed =====
T=(timeout -k 5 60)
gen() { "${T[@]}" "$DS" generate --model-dir "$M" --num-lines 3 --seed 1 --parallelism 1 "$@"; }
sum() { md5sum "$1" | cut -d' ' -f1; }
echo keep > "$TMP/existing.csv"
expect_error overwrite_refused 2 "existing.csv: already exists; pass --overwrite to replace it" "" -- \
  generate --model-dir "$M" --num-lines 3 --output "$TMP/existing.csv" --seed 1
[ "$(cat "$TMP/existing.csv")" = keep ] && pass "overwrite_refused: file untouched" ||
  fail "overwrite_refused: existing.csv was changed"
if gen --output "$TMP/existing.csv" --overwrite >/dev/null 2>&1 && head -1 "$TMP/existing.csv" | grep -q '^name,age,city$'; then
  pass "overwrite allowed with --overwrite"
else
  fail "--overwrite did not replace existing.csv"
fi
gen --output /dev/null >/dev/null 2>&1 && gen --output /dev/null >/dev/null 2>&1 &&
  pass "/dev/null is written again and again, without --overwrite" || fail "-o /dev/null refused"
[ "$(gen --output - 2>/dev/null | wc -l)" -eq 4 ] && pass "-o - writes stdout" || fail "-o - broken"

good_sum=$(sum "$TMP/good.csv")
ln -f "$TMP/good.csv" "$TMP/good_hardlink.csv"; ln -sf good.csv "$TMP/good_symlink.csv"
for target in good.csv good_hardlink.csv good_symlink.csv; do
  expect_error "output_is_training_input ($target)" 2 "is the training input of this model" "" -- \
    generate --model-dir "$M" --num-lines 3 --output "$TMP/$target" --seed 1 --overwrite
done
[ "$(sum "$TMP/good.csv")" = "$good_sum" ] && pass "training input untouched" || fail "training input changed"
params_sum=$(sum "$M/model_params.json")
for target in model_params.json synth.csv "$W"; do
  expect_error "output_inside_model_dir ($target)" 2 "is inside the model directory" "" -- \
    generate --model-dir "$M" --num-lines 3 --output "$M/$target" --seed 1 --overwrite
done
mkdir -p "$M/sub"
expect_error "output_inside_model_dir (subdirectory, via ..)" 2 "is inside the model directory" "" -- \
  generate --model-dir "$M" --num-lines 3 --output "$M/sub/../x.csv" --seed 1 --overwrite
rmdir "$M/sub"
expect_error "output_inside_other_model_dir" 2 "is inside the model directory" "" -- \
  generate --model-dir "$M" --num-lines 3 --output "$TMP/model_other/x.csv" --seed 1 --overwrite
[ "$(sum "$M/model_params.json")" = "$params_sum" ] && [ ! -e "$M/synth.csv" ] &&
  "$DS" info --model-dir "$M" >/dev/null 2>&1 && pass "model directory untouched" ||
  fail "model directory changed"

echo "secret" > "$TMP/victim.txt"
ln -sf "$TMP/victim.txt" "$TMP/planted.csv.partial"
expect_error partial_symlink_not_followed 2 "planted.csv.partial: is a symbolic link; refusing to follow it" \
  "$TMP/planted.csv" -- generate --model-dir "$M" --num-lines 3 --output "$TMP/planted.csv" --seed 1
expect_error "partial_symlink_not_followed (--resume)" 2 "is a symbolic link; refusing to follow it" \
  "$TMP/planted.csv" -- generate --model-dir "$M" --num-lines 3 --output "$TMP/planted.csv" --seed 1 --resume
[ "$(cat "$TMP/victim.txt")" = secret ] && [ -L "$TMP/planted.csv.partial" ] &&
  pass "symlink target untouched" || fail "the symlink at planted.csv.partial was followed"

# Two trainings into one directory: the second fails at once, the first goes on.
"${T[@]}" "$DS" train --input "$TMP/good.csv" "${CSV[@]}" --model-dir "$TMP/m_conc" --epochs 100000 --early-stopping=false \
  --embedding-dim 8 --rnn-units 16 --batch-size 4 --seq-length 16 --threads 1 --tokenizer char >/dev/null 2>&1 &
first=$!
for _ in $(seq 100); do [ -e "$TMP/m_conc/.datasynth.lock" ] && break; sleep 0.05; done
expect_error concurrent_train_refused 1 "another datasynth process is already training into this directory" "" -- \
  train --input "$TMP/good.csv" "${CSV[@]}" --model-dir "$TMP/m_conc" "${SMALL[@]}" --overwrite
kill -0 $first 2>/dev/null && pass "the first training run is still running" || fail "the first run died"
kill $first 2>/dev/null; wait $first 2>/dev/null
expect_error train_into_existing_model 2 "already holds a trained model; pass --overwrite to replace it" "" -- \
  train --input "$TMP/good.csv" "${CSV[@]}" --model-dir "$M" "${SMALL[@]}"
[ "$(sum "$M/model_params.json")" = "$params_sum" ] && pass "existing model untouched" || fail "existing model changed"

# ================== inputs (issue #13 item 4): streams, devices, binary ==================
ms() { date +%s%3N; }
# "Fails fast": under 1 s (3 s in the sanitizer build, whose start-up alone is slower).
FAST_MS=${FAST_MS:-$([ -n "${ASAN_OPTIONS:-}" ] && echo 3000 || echo 1000)}
for dev in /dev/zero /dev/urandom; do
  t0=$(ms)
  expect_error "device_input ($dev)" 2 "$dev: is a character device, not a file or a pipe" "$TMP/m_dev" -- \
    train --input "$dev" --model-dir "$TMP/m_dev" "${SMALL[@]}"
  [ $(( $(ms) - t0 )) -lt "$FAST_MS" ] && pass "$dev refused in under $FAST_MS ms" || fail "$dev took $(( $(ms) - t0 )) ms"
  [ -e "$TMP/m_dev" ] && fail "$dev: left the model directory" || true
done
for src in /dev/urandom /dev/zero; do
  t0=$(ms)
  out=$(cat "$src" | timeout -k 5 20 "$DS" train --input - --model-dir "$TMP/m_pipebin" "${SMALL[@]}" 2>&1)
  rc=$?
  if [ $rc -eq 2 ] && grep -q "<stdin>: binary data, not text" <<<"$out" && [ $(( $(ms) - t0 )) -lt "$FAST_MS" ]; then
    pass "binary pipe from $src refused in the first MiB ($(( $(ms) - t0 )) ms)"
  else
    fail "binary pipe from $src: rc $rc in $(( $(ms) - t0 )) ms: $out"
  fi
done
head -c 3000000 /dev/urandom > "$TMP/big_random.csv"
train_error binary_in_first_mib "big_random.csv: binary data, not text" "$TMP/big_random.csv"

stream_ok() {  # stream_ok NAME MODEL_DIR: the run's output says it read all 60 records
  if [ "$3" -eq 0 ] && grep -q "read 60 records" <<<"$4" && [ -e "$2/model_params.json" ]; then
    pass "$1"
  else
    fail "$1: rc $3: $(tail -3 <<<"$4")"
  fi
}
out=$(cat "$TMP/good.csv" | timeout -k 5 60 "$DS" train --input /dev/stdin "${CSV[@]}" \
  --model-dir "$TMP/m_stdin" "${SMALL[@]}" 2>&1); stream_ok "/dev/stdin piped" "$TMP/m_stdin" $? "$out"
out=$(gzip -c "$TMP/good.csv" | timeout -k 5 60 "$DS" train --input - "${CSV[@]}" \
  --model-dir "$TMP/m_dash" "${SMALL[@]}" 2>&1); stream_ok "gzip piped into --input -" "$TMP/m_dash" $? "$out"
out=$(timeout -k 5 60 "$DS" train --input <(cat "$TMP/good.csv") "${CSV[@]}" \
  --model-dir "$TMP/m_procsub" "${SMALL[@]}" 2>&1); stream_ok "process substitution <(...)" "$TMP/m_procsub" $? "$out"
mkfifo "$TMP/fifo"
(cat "$TMP/good.csv" > "$TMP/fifo") &
out=$(timeout -k 5 60 "$DS" train --input "$TMP/fifo" "${CSV[@]}" --model-dir "$TMP/m_fifo" "${SMALL[@]}" 2>&1)
stream_ok "FIFO with a writer" "$TMP/m_fifo" $? "$out"
kill $! 2>/dev/null; wait $! 2>/dev/null
t0=$(ms)
DATASYNTH_FIFO_WAIT_SECONDS=1 expect_error fifo_without_writer 1 "fifo: a FIFO with no writer (waited 1 s)" \
  "$TMP/m_fifo_nw" -- train --input "$TMP/fifo" "${CSV[@]}" --model-dir "$TMP/m_fifo_nw" "${SMALL[@]}"
[ $(( $(ms) - t0 )) -lt 10000 ] && pass "FIFO without a writer gave up after the wait" || fail "FIFO wait too long"
[ -e "$TMP/m_fifo_nw" ] && fail "fifo_without_writer: left the model directory" || true

# generate's start strings too.
expect_error start_strings_device 2 "start strings: /dev/zero: is a character device" "$TMP/ss_dev.csv" -- \
  generate --model-dir "$M" --start-strings /dev/zero --output "$TMP/ss_dev.csv"
out=$(timeout -k 5 60 "$DS" generate --model-dir "$M" --start-strings <(printf 'n1,\nn2,\n') --seed 1 \
  --parallelism 1 2>&1 >"$TMP/ss_pipe.csv")
[ $? -eq 0 ] && [ "$(wc -l < "$TMP/ss_pipe.csv")" -eq 3 ] && pass "start strings from <(...)" ||
  fail "start strings from <(...): $out"

# evaluate reads its tables through the same reader.
gen --output "$TMP/eval_syn.csv" >/dev/null 2>&1
expect_error evaluate_device 2 "/dev/zero: is a character device" "" -- \
  evaluate --real /dev/zero --synthetic "$TMP/eval_syn.csv"
expect_error evaluate_binary 2 "big_random.csv: binary data, not text" "" -- \
  evaluate --real "$TMP/good.csv" --synthetic "$TMP/big_random.csv"
DATASYNTH_FIFO_WAIT_SECONDS=1 expect_error evaluate_fifo_without_writer 1 "a FIFO with no writer" "" -- \
  evaluate --real "$TMP/good.csv" --synthetic "$TMP/fifo"
out=$(cat "$TMP/eval_syn.csv" | timeout -k 5 60 "$DS" evaluate --real <(cat "$TMP/good.csv") --synthetic - 2>&1)
[ $? -eq 0 ] && grep -q "60 real / 3 synthetic rows" <<<"$out" && pass "evaluate reads <(...) and stdin" ||
  fail "evaluate with streams: $out"
# evaluate never replaces a report the user did not ask to replace (#13: nothing lost).
echo keep > "$TMP/keep.json"; echo keep > "$TMP/keep.html"
expect_error evaluate_json_exists 2 "keep.json: already exists; pass --overwrite to replace it" "" -- \
  evaluate --real "$TMP/good.csv" --synthetic "$TMP/eval_syn.csv" --json "$TMP/keep.json"
expect_error evaluate_report_exists 2 "keep.html: already exists; pass --overwrite to replace it" "" -- \
  evaluate --real "$TMP/good.csv" --synthetic "$TMP/eval_syn.csv" --report "$TMP/keep.html" \
  --json "$TMP/fresh.json"
[ "$(cat "$TMP/keep.json")$(cat "$TMP/keep.html")" = keepkeep ] && [ ! -e "$TMP/fresh.json" ] &&
  pass "evaluate: refused targets untouched, nothing written" || fail "evaluate: a refused run wrote"
expect_error evaluate_json_is_input 2 "is also an input table" "" -- \
  evaluate --real "$TMP/good.csv" --synthetic "$TMP/eval_syn.csv" --json "$TMP/eval_syn.csv"
expect_error evaluate_same_targets 2 "--report and --json name the same file" "" -- \
  evaluate --real "$TMP/good.csv" --synthetic "$TMP/eval_syn.csv" --json "$TMP/x" --report "$TMP/x"
if "$DS" evaluate --real "$TMP/good.csv" --synthetic "$TMP/eval_syn.csv" --json "$TMP/keep.json" \
    --overwrite >/dev/null 2>&1 && python3 -c 'import json,sys; json.load(open(sys.argv[1]))["quality"]' \
    "$TMP/keep.json"; then pass "evaluate --overwrite replaces the JSON"
else fail "evaluate --overwrite did not replace the JSON"; fi
# ============================ flag and config ranges (#13 item 5) ============================
# Every value is range-checked when parsed, naming the flag or key and the range: no
# silent default (negative --num-lines gave 1000 records), no clamp (2^66 records), no
# wrap-around (--seed -1 gave 2^64-1).
gen_error() {  # gen_error NAME SUBSTRING ARGS...: generate from the base model must refuse
  local name=$1 want=$2
  shift 2
  expect_error "$name" 2 "$want" "$TMP/out_$name.csv" -- generate --model-dir "$M" \
    --output "$TMP/out_$name.csv" "$@"
}
gen_error num_lines_negative "--num-lines: config key 'gen_lines': value -5 out of range [0, 1000000000000]" --num-lines -5
gen_error num_lines_past_int64 "value 99999999999999999999 out of range [0, 1000000000000]" --num-lines 99999999999999999999
gen_error gen_temp_negative "config key 'gen_temp': value -1 out of range [1e-06, 1000]" --num-lines 3 --gen-temp -1
gen_error gen_temp_nan "config key 'gen_temp': 'nan' is not a finite number" --num-lines 3 --gen-temp nan
gen_error gen_temp_inf "config key 'gen_temp': 'inf' is not a finite number" --num-lines 3 --gen-temp inf
gen_error predict_batch_size_zero "config key 'predict_batch_size': value 0 out of range [1, 65536]" --num-lines 3 --predict-batch-size 0
gen_error max_invalid_negative "config key 'max_invalid': value -1 out of range [0, " --num-lines 3 --max-invalid -1
gen_error gen_chars_negative "config key 'gen_chars': value -1 out of range [0, " --num-lines 3 --gen-chars -1
gen_error generate_seed_negative "config key 'seed': value -1 out of range [0, 9223372036854775807]" --num-lines 3 --seed -1
gen_error parallelism_nan "--parallelism nan: expected a finite number" --num-lines 3 --parallelism nan
gen_error checkpoint_interval_nan "--checkpoint-interval nan" --num-lines 3 --checkpoint-interval nan
expect_error synthesize_num_lines_negative 2 "config key 'gen_lines': value -1 out of range" "$TMP/out_syn.csv" -- \
  synthesize --input "$TMP/good.csv" --output "$TMP/out_syn.csv" "${SMALL[@]}" --num-lines -1
expect_error train_seed_past_int64 2 "config key 'seed': value 18446744073709551615 out of range [0, 9223372036854775807]" \
  "$TMP/m_seedbig" -- train --input "$TMP/good.csv" --model-dir "$TMP/m_seedbig" "${NET[@]}" --seed 18446744073709551615
expect_error train_int_wraps 2 "config key 'buffer_size': value 4294967297 out of range [1, 1000000000]" "$TMP/m_wrap" -- \
  train --input "$TMP/good.csv" --model-dir "$TMP/m_wrap" "${SMALL[@]}" --buffer-size 4294967297
expect_error train_gpu_memory_limit 2 "config key 'gpu_memory_limit': memory limit 'lots'" "$TMP/m_gml" -- \
  train --input "$TMP/good.csv" --model-dir "$TMP/m_gml" "${SMALL[@]}" --gpu-memory-limit lots
expect_error train_delimiter_newline 2 "config key 'field_delimiter'" "$TMP/m_dnl" -- \
  train --input "$TMP/good.csv" --model-dir "$TMP/m_dnl" "${SMALL[@]}" --field-delimiter "$(printf 'a\nb')"
cfg_error seed_past_int64 "config key 'seed': value 18446744073709551615 out of range" '{"seed": 18446744073709551615}'
cfg_error delimiter_quote "config key 'field_delimiter': invalid CSV delimiter byte 0x22" '{"field_delimiter": "\""}'
cfg_error delimiter_multibyte "config key 'field_delimiter'" '{"field_delimiter": "é"}'

# Model metadata is checked as strictly as training input; info runs generate's checks.
for bad in newline quote cr multibyte; do
  d=$(variant "delim_$bad")
  edit_params "$d" "v = {'newline': '\n', 'quote': '\"', 'cr': '\r', 'multibyte': '\u00e9'}['$bad']; p['datasynth']['delimiter'] = v; p['field_delimiter'] = v"
  model_error "params_delimiter_$bad" "model_params.json: key 'datasynth.delimiter'" "$d"
done
d=$(variant cfg_delim_nl); edit_params "$d" 'p["field_delimiter"] = "\n"'
model_error params_field_delimiter_newline "model_params.json: config key 'field_delimiter'" "$d"
d=$(variant delim_mismatch); edit_params "$d" 'p["field_delimiter"] = ";"'
model_error params_delimiters_disagree "config key 'field_delimiter' (\";\") disagrees with key 'datasynth.delimiter'" "$d"
d=$(variant header_dup); edit_params "$d" 'p["datasynth"]["header"] = ["name", "name", "city"]'
model_error params_header_duplicate "key 'datasynth.header': duplicate column name 'name'" "$d"
d=$(variant best_epoch); edit_params "$d" 'p["datasynth"]["best_epoch"] = 99'
model_error params_best_epoch "key 'datasynth.best_epoch': 99 is not in [0, epochs_run 1]" "$d"
d=$(variant rules_format); printf '{"columns": []}' > "$d/column_rules.json"
model_error column_rules_not_rules "column_rules.json: not a datasynth column rules file" "$d"

# info on a tabular model: the same checks as generate (every batch), then a summary.
TAB=$TMP/model_tab
dst train --tabular --input "$TMP/good.csv" --model-dir "$TAB" "${SMALL[@]}" --tabular-batch-size 2 \
  2>/dev/null || fail "training the tabular model failed"
if out=$(dst info --model-dir "$TAB" 2>&1) && grep -q "tabular, 2 batch models" <<<"$out" &&
   grep -q "^batch_1: " <<<"$out" && dst info --model-dir "$TAB" --json | python3 -c \
   'import json,sys; j=json.load(sys.stdin); assert len(j["batches"]) == 2 and j["tabular"]["rows"] == 60'; then
  pass "info on a tabular model: 2 batch models, --json holds tabular.json and both batches"
else
  fail "info on a tabular model: $out"
fi
rm -rf "$TMP/v_tab"; cp -r "$TAB" "$TMP/v_tab"; printf '{"columns": []}' > "$TMP/v_tab/batch_1/column_rules.json"
model_error tabular_batch_corrupt "batch_1/column_rules.json: not a datasynth column rules file" "$TMP/v_tab"

# ============================ new-user CLI (#13 item 7) ============================
# Booleans: --x, --x true/false, --x=false; a following non-boolean word is not swallowed.
base_dir() { python3 -c "import json,sys; p=json.load(open(sys.argv[1]+'/model_params.json')); print(p['early_stopping'], p['validation_split'], p['datasynth']['header'])" "$1"; }
if dst train --input "$TMP/good.csv" --model-dir "$TMP/m_bool1" "${SMALL[@]}" --early-stopping false \
     --validation-split no 2>"$TMP/bool1.log" && [ "$(base_dir "$TMP/m_bool1")" = "False False ['name', 'age', 'city']" ] &&
   dst train --input "$TMP/good.csv" --model-dir "$TMP/m_bool2" "${SMALL[@]}" --early-stopping=false \
     --validation-split 2>"$TMP/bool2.log" && [ "$(base_dir "$TMP/m_bool2")" = "False True ['name', 'age', 'city']" ]; then
  pass "booleans: --early-stopping false / --validation-split no / --x=false / bare --x"
else
  fail "booleans: $(tail -n 2 "$TMP/bool1.log" "$TMP/bool2.log")"
fi
if dst info --json "$M" | python3 -c 'import json,sys; json.load(sys.stdin)' 2>/dev/null; then
  pass "booleans: 'info --json DIR' keeps DIR as the model directory"
else
  fail "booleans: 'info --json DIR' swallowed DIR"
fi
expect_error bool_not_a_boolean 2 "--early-stopping: 'maybe' is not a boolean" "$TMP/m_boolx" -- \
  train --input "$TMP/good.csv" --model-dir "$TMP/m_boolx" "${SMALL[@]}" --early-stopping=maybe

# CLI11's own errors: the datasynth: error: prefix and exit 2; --help still prints normally.
expect_error cli11_twice 2 "datasynth: error: --model-dir: At Most 1 required but received 2" "" -- \
  info --model-dir "$M" --model-dir "$M"
expect_error cli11_required 2 "datasynth: error: --model-dir is required" "" -- generate --num-lines 3
expect_error cli11_unexpected 2 "datasynth: error: The following argument was not expected: --bogus" "" -- \
  info --model-dir "$M" --bogus
expect_error cli_unknown_command 2 "datasynth: error: unknown command 'frob' (commands: train, info" "" -- frob --model-dir "$M"
if out=$(dst train --help 2>&1) && grep -q "^Usage: " <<<"$out" && ! grep -q "error" <<<"$out" &&
   grep -q -- "--epochs INT .*range \[1, 1000000\] \[default: 100\]" <<<"$out"; then
  pass "train --help: usage with ranges and defaults, exit 0"
else
  fail "train --help: $out"
fi

# The CUDA fallback warning: only when a device was asked for, or with --verbose.
dst generate --model-dir "$M" --num-lines 3 --output "$TMP/cuda0.csv" --seed 1 2>"$TMP/cuda0.log"
dst train --input "$TMP/good.csv" --model-dir "$TMP/m_cuda0" "${SMALL[@]}" 2>"$TMP/cuda1.log"
if grep -q "no usable GPU" "$TMP/cuda0.log" "$TMP/cuda1.log"; then
  fail "CUDA warning printed though no device was asked for: $(grep -h "no usable GPU" "$TMP/cuda0.log" "$TMP/cuda1.log" | head -1)"
else
  pass "no CUDA warning on a run that did not ask for a device"
fi
if ! dst generate --model-dir "$M" --num-lines 3 --output - --device cuda >/dev/null 2>&1; then
  # No usable GPU here: asking for auto (or --verbose) reports the fallback.
  dst generate --model-dir "$M" --num-lines 3 --output - --device auto 2>"$TMP/cuda2.log" >/dev/null
  dst --verbose generate --model-dir "$M" --num-lines 3 --output - 2>"$TMP/cuda3.log" >/dev/null
  if grep -q "no usable GPU" "$TMP/cuda2.log" && grep -q "no usable GPU" "$TMP/cuda3.log"; then
    pass "CUDA fallback reported with --device auto and with --verbose"
  else
    fail "CUDA fallback not reported with --device auto / --verbose"
  fi
fi

# The progress line names the real worker count (it said "0 workers").
dst generate --model-dir "$M" --num-lines 6 --parallelism 2 --output "$TMP/workers.csv" --seed 1 2>"$TMP/workers.log"
if grep -q "6/6 records.*  2 workers  ETA" "$TMP/workers.log" && ! grep -q " 0 workers" "$TMP/workers.log"; then
  pass "progress line: 2 workers"
else
  fail "progress line: $(grep records "$TMP/workers.log" | tail -1)"
fi

# A .csv input without --field-delimiter is a table (with a note); '' trains text lines.
sed 's/,/\t/g' "$TMP/good.csv" > "$TMP/good.tsv"
if dst train --input "$TMP/good.csv" --model-dir "$TMP/m_csvdef" "${SMALL[@]}" 2>"$TMP/csvdef.log" &&
   grep -q "note: .*good.csv: read as a table with delimiter ','" "$TMP/csvdef.log" &&
   [ "$(base_dir "$TMP/m_csvdef" | cut -d' ' -f3-)" = "['name', 'age', 'city']" ] &&
   dst train --input "$TMP/good.tsv" --model-dir "$TMP/m_tsvdef" "${SMALL[@]}" 2>/dev/null &&
   [ "$(base_dir "$TMP/m_tsvdef" | cut -d' ' -f3-)" = "['name', 'age', 'city']" ] &&
   dst train --input "$TMP/good.csv" --model-dir "$TMP/m_csvtext" "${SMALL[@]}" --field-delimiter '' 2>"$TMP/csvtext.log" &&
   [ "$(base_dir "$TMP/m_csvtext" | cut -d' ' -f3-)" = "[]" ] && ! grep -q "note:" "$TMP/csvtext.log"; then
  pass ".csv / .tsv default to ',' / tab with a note; --field-delimiter '' trains text lines"
else
  fail ".csv default delimiter: $(tail -2 "$TMP/csvdef.log")"
fi

finish
