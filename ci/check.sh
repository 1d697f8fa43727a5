#!/usr/bin/env bash
# embedcheck CI check: embed a fixed probe set with a candidate model, run `anisotropy` and `aag`
# with gates, and compare both reports with the baseline reports committed in the repository.
#
#   ci/check.sh                      # exit 0 pass, 1 a gate failed, 2 bad input/usage
#   ci/check.sh --write-baseline     # rewrite the baseline reports (after an intended change)
#
# Environment (all optional):
#   MODEL      candidate model: sentence-transformers name or folder (default: the packaged all-MiniLM-L6-v2)
#   EC         the embedcheck command (default: embedcheck)
#   PROBE      labelled texts for aag (default: ci/probe_set.jsonl; words are split, so extra embed options may follow)
#   HALVES     documents for anisotropy, embedded as halves (default: $PROBE)
#   BASELINE   folder with the baseline aag.json and anisotropy.json (default: ci/baseline)
#   OUT        work folder for embeddings and reports (default: ci-out, git-ignored); the files this
#              script writes there are deleted first, so nothing of an earlier run is compared
#   REUSE      1: keep the embeddings of an earlier run in $OUT (same MODEL and PROBE: your call);
#              the reports are always made anew
#   PYTHON     a Python 3 for printing the gate lines from the reports (default: python3)
#   MIN_AAG    gate: AAG at least this (default 0.05)
#   MIN_GAP_SD gate: centred matched-minus-floor gap at least this many floor sd (default 3)
#   MAX_DROP_AAG, MAX_DROP_GAP_SD  gates: largest allowed drop against the baseline (default 0.02 and 1)
#   TOLERANCE  a figure without a 95% interval changed beyond noise when |difference| > this (default 1e-4)
set -uo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
MODEL="${MODEL:-sentence-transformers/all-MiniLM-L6-v2}"
EC="${EC:-embedcheck}"
PROBE="${PROBE:-$HERE/probe_set.jsonl}"
HALVES="${HALVES:-$PROBE}"
BASELINE="${BASELINE:-$HERE/baseline}"
OUT="${OUT:-ci-out}"
MIN_AAG="${MIN_AAG:-0.05}"
MIN_GAP_SD="${MIN_GAP_SD:-3}"
MAX_DROP_AAG="${MAX_DROP_AAG:-0.02}"
MAX_DROP_GAP_SD="${MAX_DROP_GAP_SD:-1}"
TOLERANCE="${TOLERANCE:-1e-4}"
PYTHON="${PYTHON:-python3}"
REUSE="${REUSE:-0}"
WRITE=0
[ "${1:-}" = "--write-baseline" ] && WRITE=1

mkdir -p "$OUT" || exit 2
# 0. a clean start: the reports (and, unless REUSE=1, the embeddings) of an earlier run go first
rm -f "$OUT/aag.json" "$OUT/anisotropy.json"
if [ "$REUSE" != 1 ]; then
  for f in probe halves.a halves.b; do rm -f "$OUT/$f.npy" "$OUT/$f.jsonl" "$OUT/$f.meta.json"; done
fi
# 1. embed (skipped when the embeddings are already there)
if [ ! -f "$OUT/probe.npy" ]; then
  $EC embed $PROBE --model "$MODEL" -o "$OUT/probe.npy" --quiet || exit 2
fi
if [ ! -f "$OUT/halves.a.npy" ]; then
  $EC embed $HALVES --model "$MODEL" --halves -o "$OUT/halves.npy" --quiet || exit 2
fi

if [ "$WRITE" = 1 ]; then
  mkdir -p "$BASELINE" || exit 2
  $EC anisotropy "$OUT/halves.a.npy" "$OUT/halves.b.npy" --shared --report "$BASELINE/anisotropy.json" --quiet > /dev/null || exit $?
  $EC aag "$OUT/probe.npy" "$OUT/probe.jsonl" --report "$BASELINE/aag.json" --quiet > /dev/null || exit $?
  echo "wrote $BASELINE/anisotropy.json and $BASELINE/aag.json"
  exit 0
fi

# 2. measure with gates, compared with the baseline in the same step (--baseline)
status=0
run() {  # keep the worst exit code: 2 (bad input) > 1 (gate failed) > 0
  "$@"
  local rc=$?
  if [ "$rc" -gt "$status" ]; then status=$rc; fi
}
run $EC anisotropy "$OUT/halves.a.npy" "$OUT/halves.b.npy" --shared --fail-below "$MIN_GAP_SD" \
    --baseline "$BASELINE/anisotropy.json" --max-drop "centred.gap_over_floor_sd=$MAX_DROP_GAP_SD" \
    --tolerance "$TOLERANCE" --report "$OUT/anisotropy.json" --quiet --format json > /dev/null
run $EC aag "$OUT/probe.npy" "$OUT/probe.jsonl" --fail-below "$MIN_AAG" \
    --baseline "$BASELINE/aag.json" --max-drop "aag=$MAX_DROP_AAG" \
    --tolerance "$TOLERANCE" --report "$OUT/aag.json" --quiet --format json > /dev/null

# 3. the side-by-side tables for the log (no gates here: they ran above)
for r in anisotropy aag; do
  [ -f "$OUT/$r.json" ] && $EC compare "$BASELINE/$r.json" "$OUT/$r.json" --tolerance "$TOLERANCE" --format table
done

# 4. one PASS/FAIL line per gate of each report, then the verdict naming the failed gates
failed=""
for r in anisotropy aag; do
  if [ ! -f "$OUT/$r.json" ]; then
    echo "ERROR $r: no report (the command failed; its error line is above)"
    continue
  fi
  lines="$("$PYTHON" - "$OUT/$r.json" "$r" <<'PY'
import json, sys
report, name = json.load(open(sys.argv[1])), sys.argv[2]
for g in report.get("gates", []):
    value = "null" if g["value"] is None else f"{g['value']:.6g}"
    print(f"{'PASS' if g['passed'] else 'FAIL'} {name}: {g['name']} = {value} (needs {g['op']} {g['threshold']:g})")
PY
)" || { echo "ERROR $r: cannot read $OUT/$r.json with $PYTHON"; [ "$status" -lt 2 ] && status=2; continue; }
  [ -n "$lines" ] && echo "$lines"
  failed="$failed$(echo "$lines" | sed -n 's/^FAIL \([^ ]*\) \([^ ]*\) .*/ \1\2/p' | tr -d '\n')"
done
case $status in
  0) echo "embedcheck check: PASS" ;;
  1) echo "embedcheck check: FAIL (failed gates:$failed; reports in $OUT)" ;;
  *) echo "embedcheck check: ERROR (exit $status)" ;;
esac
exit $status
