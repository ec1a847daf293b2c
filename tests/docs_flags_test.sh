#!/usr/bin/env bash
# Docs cannot drift from the CLI: every `--flag` named in README.md and docs/*.md
# must appear in the --help output of the datasynth command it is given to.
#   - a flag after `datasynth <command>` on the same line (backslash-continued
#     lines are one line) must be in `datasynth <command> --help`;
#   - a flag after another program on the line (build/x_bench, scripts/x.sh,
#     bench/x.sh, cmake, ctest, python3, /proc/self/exe worker, ...) is that program's: skipped;
#   - any other flag (prose) must be in the help of some datasynth command.
# `--no-...` (a prefix written with dots) must be the prefix of some flag.
set -uo pipefail
DS=$1
ROOT=$2
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
for c in train info generate evaluate synthesize schema; do
  timeout 30 "$DS" "$c" --help > "$TMP/$c.help" 2>&1 || { echo "FAIL: datasynth $c --help"; exit 1; }
done
timeout 30 "$DS" --help > "$TMP/global.help" 2>&1 || { echo "FAIL: datasynth --help"; exit 1; }
timeout 120 python3 - "$TMP" "$ROOT" <<'PY'
import glob, os, re, sys
tmp, root = sys.argv[1], sys.argv[2]
FLAG = re.compile(r"(?<![\w-])--[A-Za-z][A-Za-z0-9_-]*")
def flags(path):
    return set(FLAG.findall(open(path).read()))
glob_flags = flags(os.path.join(tmp, "global.help"))
cmds = {c: flags(os.path.join(tmp, c + ".help")) | glob_flags
        for c in ("train", "info", "generate", "evaluate", "synthesize", "schema")}
union = set().union(*cmds.values())
# A program mention: datasynth <cmd>, or another program (whose flags are its own).
PROG = re.compile(r"\bdatasynth\s+(train|info|generate|evaluate|synthesize|schema)\b"
                  r"|(?:\S*/)?build/\S+|(?:\./)?scripts/\S+|(?:\./)?bench/\S+|\.ci/\S+|/proc/self/exe|"
                  r"\b(?:cmake|ctest|python3?|pip3?|git|apt-get|gdb|valgrind|nvidia-smi|"
                  r"nsys|ncu|perf|sdmetrics|torch|debootstrap|taskset|timeout|mpirun)\b")
docs = [os.path.join(root, "README.md")] + sorted(glob.glob(os.path.join(root, "docs", "*.md")))
bad, checked = [], 0
for doc in docs:
    lines = open(doc).read().split("\n")
    logical, start, buf = [], 0, ""
    for i, l in enumerate(lines):
        if not buf: start = i + 1
        if l.rstrip().endswith("\\"):
            buf += l.rstrip()[:-1] + " "
            continue
        logical.append((start, buf + l)); buf = ""
    for lineno, text in logical:
        progs = [(m.start(), m.group(1)) for m in PROG.finditer(text)]
        for m in FLAG.finditer(text):
            f = m.group(0)
            before = [p for p in progs if p[0] < m.start()]
            where = os.path.relpath(doc, root) + ":" + str(lineno)
            if before and before[-1][1] is None:
                continue  # another program's flag
            checked += 1
            prefix = f.endswith("-")
            if before:
                cmd = before[-1][1]
                ok = any(x.startswith(f) for x in cmds[cmd]) if prefix else f in cmds[cmd]
                if not ok: bad.append(f"{where}: {f} is not an option of 'datasynth {cmd}'")
            else:
                ok = any(x.startswith(f) for x in union) if prefix else f in union
                if not ok: bad.append(f"{where}: {f} is not an option of any datasynth command")
for b in bad: print("FAIL:", b)
print(f"{checked} flag mentions checked in {len(docs)} files, {len(bad)} not in the CLI")
sys.exit(1 if bad or checked == 0 else 0)
PY
