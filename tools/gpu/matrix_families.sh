#!/usr/bin/env bash
# A FROST engine matrix as one pytest process per family, side by side on the one GPU: the
# backward's (tests/numerics/test_la_frost_bwd_engines.py, MATRIX=bwd, the default) or the
# forward's (tests/numerics/test_la_frost_engines.py, MATRIX=fwd). A matrix's time goes mostly
# to host-side work (kernel lookups, the float64 references' many small launches), so three
# processes finish in about a third of one process's time. Logs: $OUT/<MATRIX>matrix_<family>.log.
#
#   MATRIX=bwd|fwd tools/gpu/matrix_families.sh [FAMILY...]
#
# FAMILY: gdn, kda, gdn2, or other (the tests whose ids name no family: the forward matrix's
# launch and buffer checks). Default: gdn kda gdn2, and other for the forward matrix.
# Kernels compile in each process unless a store has them: build one on the build host
# (`FROST_KERNEL_CACHE=.frostcache python3 tests/numerics/la_frost_bwd_smoke.py --prebuild
# --matrix` for the backward's, `python3 tools/gpu/frost_precompile.py --suites frostmatrix
# --keep` adds the forward's; packed as .kit/frostcache.tar.xz) and run stage frostcache
# first, with FROST_FFI=cute (those kernels are built in the DSL's own calling convention).
# Exits non-zero when any family's run fails; prints each family's pytest summary.
set -u
OUT=${OUT:-.}
MATRIX=${MATRIX:-bwd}
case $MATRIX in
  bwd) test=tests/numerics/test_la_frost_bwd_engines.py; defaults=(gdn kda gdn2) ;;
  fwd) test=tests/numerics/test_la_frost_engines.py; defaults=(gdn kda gdn2 other) ;;
  *) echo "matrix_families.sh: MATRIX must be bwd or fwd, got '$MATRIX'" >&2; exit 2 ;;
esac
families=("$@")
[ ${#families[@]} -gt 0 ] || families=("${defaults[@]}")
declare -A pid
for f in "${families[@]}"; do
  case $f in
    gdn) k="gdn and not gdn2" ;;  # every gdn2 test id contains "gdn"
    kda|gdn2) k=$f ;;
    other) k="not gdn and not kda" ;;
    *) echo "matrix_families.sh: FAMILY must be gdn, kda, gdn2 or other, got '$f'" >&2; exit 2 ;;
  esac
  python3 -m pytest "$test" -v -s -p no:cacheprovider \
    --durations=5 -k "$k" > "$OUT/${MATRIX}matrix_$f.log" 2>&1 &
  pid[$f]=$!
done
rc=0
for f in "${families[@]}"; do
  wait "${pid[$f]}" || rc=1
done
for f in "${families[@]}"; do
  echo "== $f: $(grep -c ' PASSED' "$OUT/${MATRIX}matrix_$f.log") passed"
  grep -E "FAILED|ERROR|^=+ .*(passed|failed|error|skipped)" "$OUT/${MATRIX}matrix_$f.log" | cut -c1-250 | tail -8
done
exit $rc
