#!/usr/bin/env bash
# A/B timing of this checkout (A) against other trees of the repository (B, C, ...) on the
# GPU machine, the way the kernel notes' "before / after" rows are measured: one process per
# tree and measurement, alternating A B A B... (A B C A B C... with more trees), so that
# drift of the machine shows as disagreement between rounds rather than as a difference
# between the trees.
#
#   bash tools/gpu/tree_ab.sh OTHER_TREE [OTHER_TREE...] [ROUNDS]   (from the repository root)
#
# OTHER_TREE: another commit's files, made on the build host with
#   mkdir .base && git archive REV | tar -x -C .base
# and carried to the GPU machine with the checkout (.base is git-ignored there by choice).
# A tree may carry environment settings: TREE::VAR=VALUE[::VAR=VALUE...] runs TREE's
# commands with those variables set, so `tree_ab.sh .::FROST_BWD_VEC_BULK=0` times this
# checkout against itself with a switch off (the FROST_FWD_* / FROST_BWD_* switches are the
# test tooling's, engines_frost/tests/frost_*_experiments.py, which the smoke and the bench
# below enter).
# ROUNDS (default 2): a last argument of digits only.
# Per round and tree: the backward smoke's kernel times (tests/numerics/la_frost_bwd_smoke.py
# --only plain: its TIME lines, the bench shape) for each of AB_SMOKE_FAMILIES (default
# "gdn"; empty: none), then the bench's rows (AB_CASES, default "fwd+bwd", several cases
# separated by ";", one bench run each; AB_IMPL, default "op FROST"; AB_REPS, default 20).
# Every kernel the trees launch is compiled in a warm-up pass first: a timing taken while
# other kernels compile is not comparable. With AB_CHECK=1 the warm-up smoke runs every
# case of each family instead of the plain one (each tree's gradients against float64 on
# every path; its SUMMARY and FAIL lines are printed), so one call checks the trees before
# timing them. Each command runs with its own tree's sources
# first on PYTHONPATH (the kits' entries are kept).
set -u
args=("$@")
rounds=2
if [ ${#args[@]} -gt 1 ] && [[ ${args[-1]} =~ ^[0-9]+$ ]]; then
  rounds=${args[-1]}
  unset 'args[-1]'
fi
[ ${#args[@]} -ge 1 ] || { echo "usage: tree_ab.sh OTHER_TREE [OTHER_TREE...] [ROUNDS]"; exit 2; }
trees=("$PWD")
envs=("")
for t in "${args[@]}"; do
  path=${t%%::*}
  settings=""
  [ "$path" != "$t" ] && settings=${t#*::}
  trees+=("$(cd "$path" && pwd)") || exit 2
  envs+=("${settings//::/ }")
done
kept=${PYTHONPATH:-}
families=${AB_SMOKE_FAMILIES-gdn}
labels=(A B C D E F G H)
IFS=';' read -r -a cases <<< "${AB_CASES:-fwd+bwd}"

run_in() {  # run_in I CMD...: CMD from tree I with its sources on PYTHONPATH and its settings
  local tree=${trees[$1]}
  local -a settings
  read -r -a settings <<< "${envs[$1]}"
  shift
  (cd "$tree" && env "${settings[@]}" PYTHONPATH="/tmp/site:$(python3 tools/pythonpath.py):$tree/bench${kept:+:$kept}" "$@")
}
smoke() {  # smoke I FAMILY [ARGS...]
  run_in "$1" python3 tests/numerics/la_frost_bwd_smoke.py --family "$2" --jobs "$(nproc)" "${@:3}"
}
bench() {  # bench I REPS: each of AB_CASES
  local c
  for c in "${cases[@]}"; do
    run_in "$1" python3 bench/bench_linear_attention.py --cases "$c" --impl "${AB_IMPL:-op FROST}" --reps "$2" || return 1
  done
}
label() {  # label I: the tree and its settings
  echo "${trees[$1]}${envs[$1]:+ (${envs[$1]})}"
}

status=0
for i in "${!trees[@]}"; do
  for f in $families; do
    if [ "${AB_CHECK:-0}" = 1 ]; then
      echo "== check ${labels[$i]} $f: $(label "$i")"
      out=$(smoke "$i" "$f" --no-time 2>&1)
      rc=$?
      grep -E "^SUMMARY|FAIL" <<< "$out"
      [ $rc = 0 ] || { status=1; echo "check failed: $(label "$i") $f (exit $rc)"; }
    else
      smoke "$i" "$f" --only plain --no-time > /dev/null 2>&1 || echo "warm-up smoke failed: $(label "$i") $f"
    fi
  done
  bench "$i" 2 > /dev/null 2>&1 || echo "warm-up bench failed: $(label "$i")"
done
for r in $(seq "$rounds"); do
  for i in "${!trees[@]}"; do
    echo "== round $r, ${labels[$i]}: $(label "$i")"
    for f in $families; do
      smoke "$i" "$f" --only plain 2>&1 | grep -E "^TIME|^SUMMARY|FAIL" || status=1
    done
    bench "$i" "${AB_REPS:-20}" 2>&1 | grep -E "^\| [A-Z]" || status=1
  done
done
exit $status
