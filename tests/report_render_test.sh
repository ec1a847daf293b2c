#!/usr/bin/env bash
# Renders the evaluation report in headless Chromium and checks that the
# screenshot shows the charts: many distinct colours, a good share of
# non-background pixels, and pixels of the report's "real" blue and
# "synthetic" orange. The same checker must reject a blank page.
# Args: <datasynth binary> <repo root>. Skips (exit 0, "SKIP") without
# Chromium or without a way to produce the report.
set -euo pipefail
CLI=$1
ROOT=$2
DATA="$ROOT/tests/data/evaluate"

CHROME=""
for c in chromium chromium-browser google-chrome; do
  if command -v "$c" >/dev/null 2>&1; then CHROME=$(command -v "$c"); break; fi
done
if [ -z "$CHROME" ]; then
  echo "SKIP: chromium not installed"
  exit 0
fi
if ! command -v python3 >/dev/null 2>&1; then
  echo "SKIP: python3 not installed"
  exit 0
fi

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
ARGS=(--real "$DATA/penguins_train.csv" --synthetic "$DATA/penguins_synth.csv"
      --holdout "$DATA/penguins_holdout.csv" --report "$TMP/report.html" --json "$TMP/scores.json")
if "$CLI" evaluate --help 2>&1 | grep -q -- "--synthetic"; then
  "$CLI" evaluate "${ARGS[@]}"
elif [ -x "$(dirname "$CLI")/evaluate_bench" ]; then
  # Until `datasynth evaluate` is wired, the bench runs the same RunEvaluate.
  "$(dirname "$CLI")/evaluate_bench" "${ARGS[@]}"
else
  echo "SKIP: neither 'datasynth evaluate' nor evaluate_bench is available"
  exit 0
fi
test -s "$TMP/report.html"
test -s "$TMP/scores.json"

shoot() {  # html png
  timeout 120 "$CHROME" --headless --no-sandbox --disable-gpu --hide-scrollbars \
    --force-device-scale-factor=1 --window-size=1200,2400 --user-data-dir="$TMP/profile" \
    --screenshot="$2" "file://$1" >"$TMP/chrome.log" 2>&1 || true
  if [ ! -s "$2" ]; then
    echo "chromium produced no screenshot:"; cat "$TMP/chrome.log"; exit 1
  fi
}
shoot "$TMP/report.html" "$TMP/report.png"
printf '<!DOCTYPE html><html><body style="background:#fff"></body></html>' >"$TMP/blank.html"
shoot "$TMP/blank.html" "$TMP/blank.png"

# The DOM Chromium built holds the inline SVG charts (parsed, not just text).
timeout 120 "$CHROME" --headless --no-sandbox --disable-gpu --user-data-dir="$TMP/profile" \
  --dump-dom "file://$TMP/report.html" >"$TMP/dom.html" 2>>"$TMP/chrome.log" || true
SVGS=$(grep -o '<svg' "$TMP/dom.html" | wc -l)
echo "DOM: $SVGS svg elements"
if [ "$SVGS" -lt 15 ]; then echo "FAIL: expected >= 15 svg elements in the DOM"; exit 1; fi

cat >"$TMP/png_check.py" <<'EOF'
# Decodes an 8-bit RGB/RGBA PNG with zlib (no PIL) and measures its content.
import struct, sys, zlib

def decode(path):
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat = 8, []
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            w, h, depth, ctype, _, _, interlace = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat.append(body)
        pos += 12 + n
    assert depth == 8 and ctype in (2, 6) and interlace == 0, (depth, ctype, interlace)
    bpp = 3 if ctype == 2 else 4
    raw = zlib.decompress(b"".join(idat))
    stride = w * bpp
    prev = bytearray(stride)
    rows = []
    for y in range(h):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        if f == 1:
            for i in range(bpp, stride):
                line[i] = (line[i] + line[i - bpp]) & 255
        elif f == 2:
            line = bytearray((a + b) & 255 for a, b in zip(line, prev))
        elif f == 3:
            for i in range(stride):
                left = line[i - bpp] if i >= bpp else 0
                line[i] = (line[i] + ((left + prev[i]) >> 1)) & 255
        elif f == 4:
            for i in range(stride):
                a = line[i - bpp] if i >= bpp else 0
                b = prev[i]
                c = prev[i - bpp] if i >= bpp else 0
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                line[i] = (line[i] + pred) & 255
        rows.append(bytes(line))
        prev = line
    return w, h, bpp, rows

def near(p, q, tol=24):
    return all(abs(a - b) <= tol for a, b in zip(p, q))

w, h, bpp, rows = decode(sys.argv[1])
colours, counts = set(), {}
for line in rows:
    for x in range(0, w * bpp, bpp * 2):  # every other pixel
        px = line[x:x + 3]
        colours.add(px)
        counts[px] = counts.get(px, 0) + 1
total = sum(counts.values())
background = max(counts, key=counts.get)
other = sum(c for k, c in counts.items() if not near(k, background, 6)) / total
blue = sum(c for k, c in counts.items() if near(k, b"\x3b\x6f\xb6"))
orange = sum(c for k, c in counts.items() if near(k, b"\xf2\x8e\x2b"))
print(f"{sys.argv[1]}: {w}x{h}, {len(colours)} colours, {100 * other:.1f}% non-background, "
      f"real-blue px {blue}, synthetic-orange px {orange}")
ok = len(colours) >= 50 and other >= 0.10 and blue >= 500 and orange >= 500
sys.exit(0 if ok else 1)
EOF

python3 "$TMP/png_check.py" "$TMP/report.png" || { echo "FAIL: report screenshot looks blank"; exit 1; }
if python3 "$TMP/png_check.py" "$TMP/blank.png"; then
  echo "FAIL: the checker accepted a blank page"; exit 1
fi
echo "report renders: ok"
