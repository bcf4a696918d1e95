#!/usr/bin/env bash
# The README's test command, run PASSES times in a row, each from a fresh clone of HEAD, beside BUSY processes that
# each spin one core, as the teardown abort was first seen. Each pass re-clones into CLONE (the same path, so one
# editable install serves all), runs scripts/run_tests.sh and appends one row to TABLE: the clone's commit, pass, exit
# status, its final count line, seconds, the lines "terminate called" in its output. Stops at the first failed pass.
# Needs an environment with the repository installed editable from CLONE (`pip install -e "CLONE[dev]"`) and
# GQ_DATA_DIR set.
#   PASSES=5 BUSY=2 CLONE=/tmp/gq_load TABLE=benchmarks/teardown/under_load.md scripts/test_under_load.sh
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
passes=${PASSES:-5} busy=${BUSY:-2} clone=${CLONE:?set CLONE} table=${TABLE:-$root/benchmarks/teardown/under_load.md}
spinners=()
for _ in $(seq "$busy"); do python3 -c "while True: pass" & spinners+=($!); done
trap 'kill "${spinners[@]}" 2>/dev/null' EXIT
header='| commit | pass | exit | final line | s | terminate called |\n|---|---|---|---|---|---|\n'
[ -f "$table" ] || printf "$header" >"$table"
for pass in $(seq "$passes"); do
  cd "$root" && rm -rf "$clone" && git clone -q "$root" "$clone" || exit 1     # never from inside the old clone
  commit=$(git -C "$clone" rev-parse --short HEAD)           # each pass tests the HEAD of its own fresh clone
  log=$(mktemp) start=$SECONDS
  (cd "$clone" && scripts/run_tests.sh) >"$log" 2>&1
  status=$?
  printf '| %s | %d | %d | %s | %d | %d |\n' "$commit" "$pass" "$status" "$(tail -n 1 "$log")" \
    $((SECONDS - start)) "$(grep -c 'terminate called' "$log")" | tee -a "$table"
  cp "$log" "/tmp/test_under_load_pass$pass.log"
  [ "$status" -eq 0 ] || exit 1
done
