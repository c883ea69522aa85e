#!/usr/bin/env bash
# Mutation check (issue 29): applies the curated mutations of scripts/mutations.txt one at a time
# to a scratch copy of the tree, rebuilds only the targets each one names, runs the tests that
# should catch it, and prints caught / not caught per mutation and the total.
#
#   scripts/mutation_check.sh                 every mutation
#   scripts/mutation_check.sh M3 M10 M27      a subset, by id
#   scripts/mutation_check.sh --list          the list (id, file, targets, description)
#   options: --no-baseline (skip the unmutated run of the same tests), --keep-going-on-stale,
#            --jobs N (ninja -j, default 2)
#
# The source tree is never edited: the working tree (tracked and untracked, not ignored files) is
# copied to $MUTATION_DIR (default <repo>/build-mutation/src, ignored by git) and built there in
# its own build directory (Release, no CUDA, no bench); with ccache and CCACHE_BASEDIR above the
# repository, the first build is mostly cache hits. The copy's mutated file is put back after each
# mutation and on any exit (trap).
#
# A mutation whose old text is not found exactly once in its file makes the script fail (exit 2)
# before anything is built: the list must follow the code. A mutation that does not compile counts
# as an error, not as caught. Caught = some test command of the mutation fails (or times out).
# Exit status: 0 when every selected mutation is caught, 1 when some is not, 2 on a stale or
# malformed list, a baseline failure or a build error.
#
# Data file format (scripts/mutations.txt): blocks separated by blank lines, one field a line:
#   id: M1
#   file: core/framework.cc                      (relative to the repository root)
#   desc: one line saying what the bug is
#   old: exact text (\n for a newline, \t for a tab)      } one or more pairs, applied in order;
#   new: replacement text                                  } each old text must occur exactly once
#   build: stepcast_tests calibrate_import_test  (ninja targets)
#   test: gtest stepcast_tests Overlap.*:Memory.*   (binary under build/bin or build/tests, filter)
#   test: ctest ^calibrate_tool$                 (ctest -R regex)
#   test: sh STEPCAST=@bin/stepcast@ bash @src@/tests/cli_test.sh @src@   (a shell command)
# '#' starts a comment line.
set -u -o pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
list_file="${MUTATION_LIST:-$here/scripts/mutations.txt}"
scratch="${MUTATION_DIR:-$here/build-mutation/src}"
jobs=2
test_timeout="${MUTATION_TEST_TIMEOUT:-300}"
do_baseline=1
only_list=0
ids=()
while [ $# -gt 0 ]; do
  case "$1" in
    --list) only_list=1 ;;
    --no-baseline) do_baseline=0 ;;
    --jobs) shift; jobs="$1" ;;
    -h|--help) sed -n '2,31p' "${BASH_SOURCE[0]}"; exit 0 ;;
    M*) ids+=("$1") ;;
    *) echo "mutation_check: unknown argument '$1' (ids look like M7; --list, --no-baseline, --jobs N)" >&2; exit 2 ;;
  esac
  shift
done

# ---- parse the list into parallel arrays (python3 does the exact-text work) ----------------------
parsed="$(python3 - "$list_file" "$here" "$only_list" "${ids[@]}" <<'PY'
import sys, os, json
path, root, only_list, *want = sys.argv[1:]
blocks, cur = [], None
def flush():
    global cur
    if cur: blocks.append(cur)
    cur = None
for n, raw in enumerate(open(path, encoding="utf-8"), 1):
    line = raw.rstrip("\n")
    if line.startswith("#"): continue
    if not line.strip():
        flush(); continue
    if ":" not in line:
        sys.exit(f"{path}:{n}: expected 'field: value', got {line[:60]!r}")
    k, v = line.split(":", 1)
    v = v[1:] if v.startswith(" ") else v
    if cur is None: cur = {"line": n, "pairs": [], "tests": [], "build": []}
    if k == "old": cur["pairs"].append([v, None])
    elif k == "new":
        if not cur["pairs"] or cur["pairs"][-1][1] is not None:
            sys.exit(f"{path}:{n}: 'new' without an 'old' before it")
        cur["pairs"][-1][1] = v
    elif k == "test": cur["tests"].append(v)
    elif k == "build": cur["build"] += v.split()
    elif k in ("id", "file", "desc"): cur[k] = v
    else: sys.exit(f"{path}:{n}: unknown field {k!r}")
flush()
def unescape(s): return s.replace("\\n", "\n").replace("\\t", "\t")
seen, bad = set(), []
for b in blocks:
    for f in ("id", "file", "desc"):
        if f not in b: sys.exit(f"{path}:{b['line']}: block without '{f}'")
    if b["id"] in seen: sys.exit(f"{path}:{b['line']}: duplicate id {b['id']}")
    seen.add(b["id"])
    if not b["pairs"] or any(p[1] is None for p in b["pairs"]):
        sys.exit(f"{path}:{b['line']}: {b['id']}: needs old/new pairs")
    if not b["tests"] or not b["build"]:
        sys.exit(f"{path}:{b['line']}: {b['id']}: needs 'build' and 'test'")
    text = open(os.path.join(root, b["file"]), encoding="utf-8").read()
    for old, new in b["pairs"]:
        c = text.count(unescape(old))
        if c != 1:
            bad.append(f"{b['id']} ({b['file']}): old text found {c} times, wanted once: {old[:80]!r}")
        else:
            text = text.replace(unescape(old), unescape(new))
if want:
    missing = [w for w in want if w not in seen]
    if missing: sys.exit(f"unknown mutation id(s): {' '.join(missing)}")
    blocks = [b for b in blocks if b["id"] in want]
if bad:
    print("STALE " + json.dumps(bad))
    sys.exit(0)
for b in blocks:
    print("MUT " + json.dumps(b))
PY
)" || { echo "mutation_check: cannot read $list_file" >&2; exit 2; }

if grep -q '^STALE ' <<<"$parsed"; then
  echo "mutation_check: the mutation list is stale (old text must occur exactly once):" >&2
  sed -n 's/^STALE //p' <<<"$parsed" | python3 -c 'import json,sys; [print("  " + x) for x in json.load(sys.stdin)]' >&2
  exit 2
fi
mapfile -t muts < <(sed -n 's/^MUT //p' <<<"$parsed")
field() { python3 -c 'import json,sys; b=json.loads(sys.argv[1]); v=b[sys.argv[2]]; print("\n".join(v) if isinstance(v,list) else v)' "$1" "$2"; }

if [ "$only_list" = 1 ]; then
  for m in "${muts[@]}"; do
    printf '%-4s %-40s %s\n' "$(field "$m" id)" "$(field "$m" file)" "$(field "$m" desc)"
  done
  exit 0
fi

# ---- scratch copy and its build ------------------------------------------------------------------
restore_file=""
restore() {
  if [ -n "$restore_file" ]; then
    cp "$here/$restore_file" "$scratch/$restore_file"  # a new mtime: ninja rebuilds what the mutant built
    restore_file=""
  fi
}
trap 'restore; exit 130' INT TERM
trap 'restore' EXIT

mkdir -p "$scratch"
echo "mutation_check: copying the working tree to $scratch"
(cd "$here" && git ls-files -z --cached --others --exclude-standard | while IFS= read -r -d '' f; do
   [ -f "$f" ] || continue
   if ! cmp -s "$f" "$scratch/$f"; then mkdir -p "$scratch/$(dirname "$f")"; cp "$f" "$scratch/$f"; fi
 done)
build="$scratch/build"
launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
fi
if [ ! -f "$build/build.ninja" ]; then
  cmake -S "$scratch" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSTEPCAST_WITH_CUDA=OFF \
        -DSTEPCAST_BUILD_BENCH=OFF "${launcher[@]}" >"$scratch/configure.log" 2>&1 \
    || { echo "mutation_check: configure failed, see $scratch/configure.log" >&2; exit 2; }
fi

targets_of_all=()
for m in "${muts[@]}"; do mapfile -t t < <(field "$m" build); targets_of_all+=("${t[@]}"); done
mapfile -t targets_of_all < <(printf '%s\n' "${targets_of_all[@]}" | sort -u)
nbuild() { nice -n 10 cmake --build "$build" -j "$jobs" --target "$@" >"$scratch/build.log" 2>&1; }

run_test() {  # run_test SPEC -> 0 pass, 1 fail
  local spec="$1" kind rest bin filter
  kind="${spec%% *}"; rest="${spec#* }"
  case "$kind" in
    gtest)
      bin="${rest%% *}"; filter="${rest#* }"
      [ "$filter" = "$rest" ] && filter='*'
      local exe="$build/bin/$bin"; [ -x "$exe" ] || exe="$build/tests/$bin"
      (cd "$build/tests" && timeout "$test_timeout" "$exe" --gtest_filter="$filter" --gtest_brief=1) >"$scratch/test.log" 2>&1 ;;
    ctest)
      timeout "$test_timeout" ctest --test-dir "$build" -R "$rest" --output-on-failure --timeout "$test_timeout" \
        >"$scratch/test.log" 2>&1 ;;
    sh)
      rest="${rest//@src@/$scratch}"; rest="${rest//@bin@/$build/bin}"; rest="${rest//@build@/$build}"
      (cd "$build" && timeout "$test_timeout" bash -c "$rest") >"$scratch/test.log" 2>&1 ;;
    *) echo "mutation_check: unknown test kind '$kind'" >&2; return 2 ;;
  esac
}
# A gtest filter that matches nothing passes silently: count the tests it ran.
ran_none() { grep -q '^\[==========\] 0 tests' "$scratch/test.log" 2>/dev/null; }

start_all=$(date +%s)
echo "mutation_check: building ${targets_of_all[*]}"
nbuild "${targets_of_all[@]}" || { echo "mutation_check: the unmutated tree does not build, see $scratch/build.log" >&2; exit 2; }

if [ "$do_baseline" = 1 ]; then
  declare -A done_spec=()
  baseline_failed=0
  for m in "${muts[@]}"; do
    mapfile -t tests < <(field "$m" tests)
    for s in "${tests[@]}"; do
      [ -n "${done_spec[$s]:-}" ] && continue
      done_spec[$s]=1
      if ! run_test "$s" || ran_none; then
        echo "mutation_check: baseline failure (unmutated tree, or a filter that runs no test): $s" >&2
        tail -20 "$scratch/test.log" >&2
        baseline_failed=1
      fi
    done
  done
  [ "$baseline_failed" = 1 ] && exit 2
  echo "mutation_check: baseline passes ($(( $(date +%s) - start_all )) s so far)"
fi

caught=0; missed=0; errors=0; rows=()
for m in "${muts[@]}"; do
  id="$(field "$m" id)"; file="$(field "$m" file)"; desc="$(field "$m" desc)"
  mapfile -t targets < <(field "$m" build)
  mapfile -t tests < <(field "$m" tests)
  t0=$(date +%s)
  restore_file="$file"
  python3 - "$scratch/$file" "$m" <<'PY' || { echo "mutation_check: $id: cannot apply" >&2; exit 2; }
import json, sys
path, b = sys.argv[1], json.loads(sys.argv[2])
def unescape(s): return s.replace("\\n", "\n").replace("\\t", "\t")
text = open(path, encoding="utf-8").read()
for old, new in b["pairs"]:
    o = unescape(old)
    if text.count(o) != 1: sys.exit(f"{b['id']}: old text found {text.count(o)} times in the copy")
    text = text.replace(o, unescape(new))
open(path, "w", encoding="utf-8").write(text)
PY
  result=""; by=""
  if ! nbuild "${targets[@]}"; then
    result="BUILD-ERROR"; errors=$((errors + 1))
    tail -15 "$scratch/build.log" >&2
  else
    for s in "${tests[@]}"; do
      if ! run_test "$s"; then
        by+="${by:+; }$s"
        grep -E '^\[  FAILED  \]|^FAIL|FAIL |Failed' "$scratch/test.log" | grep -v 'listed below' | head -3 | sed 's/^/      /'
      fi
    done
    if [ -n "$by" ]; then result="caught"; caught=$((caught + 1)); else result="NOT CAUGHT"; missed=$((missed + 1)); fi
  fi
  restore
  secs=$(( $(date +%s) - t0 ))
  printf '%-4s %-11s %4ss  %s\n' "$id" "$result" "$secs" "$desc"
  [ -n "$by" ] && printf '      by: %s\n' "$by"
  rows+=("$id|$result|$secs|$file|$desc")
done
# Leave the copy's build matching the source again (the last restored file recompiles from ccache).
nbuild "${targets_of_all[@]}" || true

total=$((caught + missed + errors))
echo
echo "| id | file | result | s | mutation |"
echo "|---|---|---|---|---|"
for r in "${rows[@]}"; do
  IFS='|' read -r id result secs file desc <<<"$r"
  echo "| $id | $file | $result | $secs | $desc |"
done
echo
echo "mutation_check: $caught of $total caught, $missed not caught, $errors build errors ($(( $(date +%s) - start_all )) s)"
[ "$errors" -gt 0 ] && exit 2
[ "$missed" -gt 0 ] && exit 1
exit 0
