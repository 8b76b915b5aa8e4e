#!/usr/bin/env bash
# The FROST backward engine matrix (tests/numerics/test_la_frost_bwd_engines.py) as one pytest
# process per family, side by side on the one GPU: the matrix's time goes mostly to host-side
# work (kernel lookups, the float64 references' many small launches), so three processes
# finish in about a third of one process's time. Logs: $OUT/bwdmatrix_<family>.log.
#
#   tools/gpu/bwd_matrix_families.sh [FAMILY...]   (default: gdn kda gdn2)
#
# Kernels compile in each process unless a store has them: build one on the build host
# (`FROST_KERNEL_CACHE=.frostcache python3 tests/numerics/la_frost_bwd_smoke.py --prebuild
# --matrix`, packed as .kit/frostcache.tar.xz) and run stage frostcache first, with
# FROST_FFI=cute (those kernels are built in the DSL's own calling convention).
# Exits non-zero when any family's run fails; prints each family's pytest summary.
set -u
OUT=${OUT:-.}
families=("$@")
[ ${#families[@]} -gt 0 ] || families=(gdn kda gdn2)
declare -A pid
for f in "${families[@]}"; do
  case $f in
    gdn) k="gdn and not gdn2" ;;  # every gdn2 test id contains "gdn"
    kda|gdn2) k=$f ;;
    *) echo "bwd_matrix_families.sh: FAMILY must be gdn, kda or gdn2, got '$f'" >&2; exit 2 ;;
  esac
  python3 -m pytest tests/numerics/test_la_frost_bwd_engines.py -v -s -p no:cacheprovider \
    --durations=5 -k "$k" > "$OUT/bwdmatrix_$f.log" 2>&1 &
  pid[$f]=$!
done
rc=0
for f in "${families[@]}"; do
  wait "${pid[$f]}" || rc=1
done
for f in "${families[@]}"; do
  echo "== $f: $(grep -c ' PASSED' "$OUT/bwdmatrix_$f.log") passed"
  grep -E "FAILED|ERROR|^=+ .*(passed|failed|error|skipped)" "$OUT/bwdmatrix_$f.log" | cut -c1-250 | tail -8
done
exit $rc
