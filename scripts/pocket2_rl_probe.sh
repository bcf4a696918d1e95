#!/usr/bin/env bash
# One device call probing whether vanilla GRPO amplifies pocket2's hacks given more updates or a larger learning rate:
# groups side by side, each 5 vanilla runs of the pocket2 preset (seeds 41-45) with its own config overrides (steps
# too), one GPU per group when nvidia-smi lists several; then each group's liveness summary
# (scripts/pocket2_liveness.py: train hack per mode over the last 10 updates, deploy hack, the held-out families)
# -> $OUT/pocket2_probe_<group>.json. Reads the weights at gradient_quarantine/pocket2_model. Everything under $OUT
# (runs without checkpoints, logs, summaries) is packed into session.tgz.* parts under 16 MiB, as
# scripts/pocket2_session.sh does.
# Usage, from the repository root (LABEL=OVERRIDES, one group each):
#   bash scripts/pocket2_rl_probe.sh SECONDS 'lr3e-2={"steps":100}' 'lr1e-1={"steps":100,"lr":0.1}'
set -u -o pipefail
budget=${1:?usage: bash scripts/pocket2_rl_probe.sh SECONDS LABEL=OVERRIDES ...}; shift
: "${OUT:?OUT must name the folder the results go to}"
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
[ -d /tmp/site/papermill ] || python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl || exit 1
if ! ldconfig -p | grep -q libseccomp.so.2; then for f in .debs/*.deb; do dpkg -x "$f" /; done; ldconfig; fi
python3 -c "from gradient_quarantine.pocket2 import pocket2_weights; pocket2_weights()" || exit 1
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true) groups=$# g=0 pids=() labels=()
mkdir -p "$OUT/logs"
for spec in "$@"; do
  label=${spec%%=*} overrides=${spec#*=}
  for s in 41 42 43 44 45; do
    (if [ "$ngpu" -ge 2 ]; then export CUDA_VISIBLE_DEVICES=$((g % ngpu)); fi
     OMP_NUM_THREADS=1 GQ_GRADE_WORKERS=$(( 2 * $(nproc) / (5 * groups) > 2 ? 2 * $(nproc) / (5 * groups) : 2 )) \
       exec timeout -s INT $((budget - 90 - SECONDS)) python3 -m gradient_quarantine.train --preset pocket2 \
       --arm vanilla --seed "$s" --overrides "$overrides" \
       --run-dir "$OUT/runs/$label/pocket2_vanilla_s$s") > "$OUT/logs/${label}_s$s.log" 2>&1 &
    pids+=($!)
  done
  labels+=("$label"); g=$((g + 1))
done
failed=0; for p in "${pids[@]}"; do wait "$p" || failed=$((failed + 1)); done
echo "runs done at ${SECONDS}s ($failed failed)"
for label in "${labels[@]}"; do
  timeout -s INT $((budget - 15 - SECONDS)) python3 scripts/pocket2_liveness.py --out "$OUT/pocket2_probe_$label.json" \
    "$OUT/runs/$label"/pocket2_vanilla_s* > "$OUT/logs/liveness_$label.log" 2>&1 &
done
wait; tail -n 2 "$OUT"/logs/liveness_*.log; echo "summaries done at ${SECONDS}s"
rm -rf "$OUT"/runs/*/*/checkpoints "$OUT"/runs/*/*/.lock
pack=$(mktemp -d); tar czf "$pack/session.tgz" -C "$OUT" . && find "$OUT" -mindepth 1 -delete \
  && split -b 15M "$pack/session.tgz" "$OUT/session.tgz." && ls -l "$OUT"
[ "$failed" = 0 ]
