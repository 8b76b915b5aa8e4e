#!/usr/bin/env bash
# A/B timing of this checkout (A) against another tree of the repository (B) on the GPU
# machine, the way the kernel notes' "before / after" rows are measured: one process per
# tree and measurement, alternating A B A B..., so that drift of the machine shows as
# disagreement between rounds rather than as a difference between the trees.
#
#   bash tools/gpu/tree_ab.sh OTHER_TREE [ROUNDS]        (from the repository root)
#
# OTHER_TREE: another commit's files, made on the build host with
#   mkdir .base && git archive REV | tar -x -C .base
# and carried to the GPU machine with the checkout (.base is git-ignored there by choice).
# Per round and tree: the backward smoke's kernel times (tests/numerics/la_frost_bwd_smoke.py
# --only plain: its TIME lines, the bench shape) for each of AB_SMOKE_FAMILIES (default
# "gdn"; empty: none), then the bench's rows (AB_CASES, default "fwd+bwd"; AB_IMPL, default
# "op FROST"; AB_REPS, default 20). Every kernel both trees launch is compiled in a warm-up
# pass first: a timing taken while other kernels compile is not comparable. Each command
# runs with its own tree's sources first on PYTHONPATH (the kits' entries are kept).
set -u
other=$(cd "${1:?usage: tree_ab.sh OTHER_TREE [ROUNDS]}" && pwd) || exit 2
rounds=${2:-2}
here=$PWD
kept=${PYTHONPATH:-}
families=${AB_SMOKE_FAMILIES-gdn}

run_in() {  # run_in TREE CMD...: CMD from TREE with that tree's sources on PYTHONPATH
  local tree=$1
  shift
  (cd "$tree" && PYTHONPATH="/tmp/site:$(python3 tools/pythonpath.py):$tree/bench${kept:+:$kept}" "$@")
}
smoke() {  # smoke TREE FAMILY [ARGS...]
  run_in "$1" python3 tests/numerics/la_frost_bwd_smoke.py --family "$2" --only plain --jobs "$(nproc)" "${@:3}"
}
bench() {  # bench TREE REPS
  run_in "$1" python3 bench/bench_linear_attention.py --cases "${AB_CASES:-fwd+bwd}" --impl "${AB_IMPL:-op FROST}" \
    --reps "$2"
}

for tree in "$here" "$other"; do
  for f in $families; do
    smoke "$tree" "$f" --no-time > /dev/null 2>&1 || echo "warm-up smoke failed: $tree $f"
  done
  bench "$tree" 2 > /dev/null 2>&1 || echo "warm-up bench failed: $tree"
done
status=0
for r in $(seq "$rounds"); do
  for tree in "$here" "$other"; do
    label=A
    [ "$tree" = "$other" ] && label=B
    echo "== round $r, $label: $tree"
    for f in $families; do
      smoke "$tree" "$f" 2>&1 | grep -E "^TIME|^SUMMARY|FAIL" || status=1
    done
    bench "$tree" "${AB_REPS:-20}" 2>&1 | grep -E "^\| [A-Z]" || status=1
  done
done
exit $status
