#!/usr/bin/env bash
# Build pocket-model variants side by side on one GPU host, then measure each one's base rates
# (scripts/pocket_base_rates.py).
# Usage, from the repository root on the device:
#   bash scripts/pocket_variants.sh WORKDIR SECONDS SAMPLES NAME='{"recipe": "json"}' ...
# Each variant runs in its own session, so a later call with the same WORKDIR finds it still running (or done) and only
# waits. Waits up to SECONDS for every variant, then copies the base rates and the finished models (one tarball each)
# to $OUT.
set -u
work=$1; secs=$2; samples=$3; shift 3
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
mkdir -p "$work"
for spec in "$@"; do
  name=${spec%%=*}; printf '%s' "${spec#*=}" > "$work/$name.recipe.json"
  [ -e "$work/$name.started" ] && continue
  touch "$work/$name.started"
  setsid nohup bash -c "python3 scripts/build_pocket.py ${POCKET_STEPS:+--steps $POCKET_STEPS} --out '$work/$name' \
    --recipe \"\$(cat '$work/$name.recipe.json')\" > '$work/$name.build.log' 2>&1 \
    && python3 scripts/pocket_base_rates.py --model '$work/$name' --samples $samples \
    --out '$work/$name.rates.json' > '$work/$name.rates.log' 2>&1; \
    touch '$work/$name.done'" < /dev/null > /dev/null 2>&1 &
done
end=$((SECONDS + secs))
pending() { for spec in "$@"; do [ -e "$work/${spec%%=*}.done" ] || echo "${spec%%=*}"; done; }
while [ $SECONDS -lt $end ] && [ -n "$(pending "$@")" ]; do sleep 5; done
for spec in "$@"; do
  name=${spec%%=*}; echo "== $name"; tail -n 3 "$work/$name.build.log"; tail -n 4 "$work/$name.rates.log" 2>/dev/null
  if [ -e "$work/$name.rates.json" ]; then
    cp "$work/$name.rates.json" "$OUT/"; tar czf "$OUT/$name.tar.gz" -C "$work" "$name"
  fi
done
nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv; uptime
