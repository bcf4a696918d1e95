#!/usr/bin/env bash
# One device call for the second organism, pocket2 (nbs/08a_pocket2.ipynb), in one of two stages:
#   build  two builds of the weights from the recipe, side by side (deterministic kernels; each on its own GPU when
#          nvidia-smi lists two), their SHA-256s and whether they are equal -> $OUT/pocket2_build.json, the logs, and
#          the first build's folder split into files under 16 MiB -> $OUT/pocket2_model_parts (join it with
#          `python scripts/pocket2_weights.py join <parts> gradient_quarantine/pocket2_model`);
#   live   with the weights at gradient_quarantine/pocket2_model: base rates (eval markers, 8 samples per prompt, each
#          mode under its hint and with no hint, solve per tier, on the in-family and the held-out-family test sets)
#          -> $OUT/pocket2_base_rates.json; then 5 vanilla GRPO runs of the pocket2 preset side by side (seeds 41-45,
#          the trainer's command line), each run's deployed model also on the held-out-family test set
#          -> $OUT/pocket2_liveness.json and the runs (written there as they go) without checkpoints under $OUT/runs/.
#   all    build, then live on the first build. With BUILDS=1 it fits one call on one H200: v1 took 326 s a build
#          (50 s corpus, tokenizer and encoding; 275 s training) and 137 s live; v2's corpus is about 1.4 times v1's.
# At the end everything under $OUT (summaries, logs, runs, the weights' parts) is packed into one tar.gz split into
# parts under 16 MiB, $OUT/session.tgz.aa, .ab, ... (the device returns only a few files, each under 16 MiB). Unpack:
#   mkdir -p p2 && cat <files_at>/session.tgz.* | tar xzf - -C p2
#   python scripts/pocket2_weights.py join p2/pocket2_model_parts gradient_quarantine/pocket2_model
# The whole v2 measurement, one device call (nvidia-h200):  BUILDS=1 bash scripts/pocket2_session.sh all 550
# The carried wheels (.whl) give papermill, fastcore and the sandbox's bubblewrap and libseccomp bindings; carried
# Debian packages (.debs) give libseccomp itself where the image lacks it (as scripts/answer_session.sh).
# Usage, from the repository root:  [SMOKE=1] [BUILDS=1] bash scripts/pocket2_session.sh build|live|all [SECONDS]
# SECONDS (default 555) bounds the whole call: a build still running 30 s before the end is stopped (its log comes
# back), and so is a run still running 60 s before it.
# SMOKE=1: the same steps at toy size (a --smoke build, 2 samples of 6 prompts, 2 updates a run), minutes on a CPU.
set -u -o pipefail
stage=${1:?usage: [SMOKE=1] bash scripts/pocket2_session.sh build|live|all [SECONDS]}
budget=${2:-555} smoke=${SMOKE:-0} builds=${BUILDS:-2}
: "${OUT:?OUT must name the folder the results go to}"
case $stage in build|live|all) ;; *) echo "unknown stage $stage: build, live or all" >&2; exit 2;; esac
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
if ! python3 -c "import papermill, fastcore, pyseccomp" 2>/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
    .whl/*.whl || exit 1
fi
if ! ldconfig -p | grep -q libseccomp.so.2; then
  for f in .debs/*.deb; do [ -f "$f" ] && dpkg -x "$f" /; done; ldconfig
fi
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
work=$(mktemp -d /tmp/pocket2_session.XXXXXX); mkdir -p "$OUT/logs"
left() { echo $((budget - SECONDS)); }
phase() { echo "$1 at ${SECONDS}s" | tee -a "$OUT/logs/phases.txt"; }
mps=0
if [ "$ngpu" -ge 1 ] && command -v nvidia-cuda-mps-control >/dev/null; then   # side by side processes share the GPU
  export CUDA_MPS_PIPE_DIRECTORY=$work/mps_pipe CUDA_MPS_LOG_DIRECTORY=$work/mps_log   # (as run_answer.py's grid)
  mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
  if nvidia-cuda-mps-control -d; then mps=1; trap 'echo quit | nvidia-cuda-mps-control' EXIT
  else unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY; fi
fi
python3 - "$stage" "$smoke" "$ngpu" "$builds" "$mps" <<'PY'
# The estimate, from v1's measured session on one H200 (08a): a deterministic build took 326-337 s with another beside
# it under MPS (50-55 s of corpus, tokenizer and encoding, then 4,000 training steps), so about 300 s alone; v2's
# corpus is 1.48 times v1's records (the training steps are the same). The live stage took 137 s.
import sys
stage, smoke, ngpu, builds, mps = sys.argv[1], sys.argv[2] == "1", int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
share = (1.1 if mps == "1" else 1.3) if builds == 2 and ngpu < 2 else 1.0
build = (75 + 250 * share, 100 + 290 * share)
live = (137, 200)                            # base rates, 5 runs side by side, held-out evaluations
est = {"build": build, "live": live, "all": (build[0] + live[0], build[1] + live[1])}[stage]
print(f"pocket2 session: stage {stage}, {builds} build(s), {ngpu} GPU(s), MPS {'on' if mps == '1' else 'off'}"
      + (" (SMOKE: toy sizes)" if smoke else ""))
print(f"estimated GPU time: {est[0] / 60:.1f} to {est[1] / 60:.1f} min"
      + ((" (the upper end is over one call: BUILDS=1, or kind nvidia-h200-x2, if the first log lines say so)"
          if builds > 1 else " (the upper end is over one call: the build's log gives its seconds every 200 steps)")
         if stage != "live" and est[1] > 540 else ""))
PY
if [ "$stage" != build ]; then
  python3 -c "from gradient_quarantine import sandbox as s
print('engine problem:', s.engine_problem(), '| warm workers problem:', s.warm_problem())
s.seccomp_filter(); print('seccomp filter: built')" || exit 1
fi

build_stage() {
  local flags="--deterministic --device cuda" b pids=()       # never a silent CPU build on the GPU host
  [ "$smoke" = 1 ] && flags="--smoke --device cpu"
  for b in $(seq 1 "$builds"); do
    (if [ "$ngpu" -ge 2 ]; then export CUDA_VISIBLE_DEVICES=$((b - 1)); fi     # two GPUs: one build each
     exec timeout -s INT $(( $(left) - 30 )) python3 scripts/build_pocket2.py --out "$work/build$b" $flags \
       ${STEPS:+--steps $STEPS}) > "$OUT/logs/build$b.log" 2>&1 &
    pids+=($!)
  done
  for b in "${!pids[@]}"; do wait "${pids[$b]}"; echo "build $((b + 1)) exit $?" | tee -a "$OUT/logs/builds.txt"; done
  python3 - "$work" "$OUT" "$builds" <<'PY'
import hashlib, json, sys, torch
from pathlib import Path
work, out, n = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
rows = []
for b in range(1, n + 1):
    d = work/f"build{b}"
    card = json.loads((d/"pocket2_card.json").read_text()) if (d/"pocket2_card.json").exists() else None
    sha = hashlib.sha256((d/"model.safetensors").read_bytes()).hexdigest() if card else None
    lines = (out/"logs"/f"build{b}.log").read_text().splitlines()
    rows.append({"build": b, "complete": card is not None, "sha256": sha, "card": card, "log_tail": lines[-8:],
                 "last_progress": next((l for l in reversed(lines) if l.startswith("step ")), None)})
shas = [r["sha256"] for r in rows]
summary = {"gpu": torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu", "torch": torch.__version__,
           "builds": rows, "sha256": shas, "all_complete": all(r["complete"] for r in rows),
           "identical": all(rows[0]["complete"] and s == shas[0] for s in shas) if len(rows) > 1 else None}
(out/"pocket2_build.json").write_text(json.dumps(summary, indent=1) + "\n")
print("| build | complete | sha256 | final loss | seconds (cumulative: corpus, tokenizer, encode, train) | last step |")
print("|---|---|---|---|---|---|")
for r in rows:
    c = r["card"] or {}
    print(f"| {r['build']} | {r['complete']} | {(r['sha256'] or '-')[:16]} | {c.get('final_loss', '-')} | "
          f"{ {k: round(v) for k, v in c.get('seconds', {}).items()} } | {r['last_progress']} |")
print("identical:", summary["identical"])
sys.exit(0 if summary["all_complete"] else f"not every build finished: see {out}/logs/build*.log")
PY
  local built=$?
  if [ -f "$work/build1/pocket2_card.json" ]; then
    python3 scripts/pocket2_weights.py split "$work/build1" "$OUT/pocket2_model_parts" || return 1
  fi
  phase "builds done"
  return $built
}

live_stage() {
  local model=$1 seeds="41 42 43 44 45" s rates="" train="" held="" pids=()
  [ "$smoke" = 1 ] && rates="--samples 2 --n-prompts 6 --max-new-tokens 24" && seeds="41 42" && held="--eval-n 6" \
    && train="--steps 2 --group-size 2 --prompts-per-update 2 --max-new-tokens 24 --eval-n 6 --eval-max-new-tokens 24"
  [ "$model" != gradient_quarantine/pocket2_model ] && train="$train --model $model"   # else the preset's "pocket2"
  python3 -c "from gradient_quarantine.pocket2 import pocket2_weights; pocket2_weights('$model')" || return 1
  python3 scripts/pocket2_base_rates.py --model "$model" --out "$OUT/pocket2_base_rates.json" $rates \
    2>&1 | tee "$OUT/logs/base_rates.log" || return 1
  phase "base rates done"
  for s in $seeds; do
    OMP_NUM_THREADS=1 GQ_GRADE_WORKERS=$(( 2 * $(nproc) / 5 > 2 ? 2 * $(nproc) / 5 : 2 )) \
      timeout -s INT $(( $(left) - 60 )) python3 -m gradient_quarantine.train --preset pocket2 --arm vanilla \
        --seed "$s" --run-dir "$OUT/runs/pocket2_vanilla_s$s" $train > "$OUT/logs/vanilla_s$s.log" 2>&1 &
    pids+=($!)
  done
  local failed=0
  for s in "${pids[@]}"; do wait "$s" || failed=$((failed + 1)); done
  phase "vanilla runs done ($failed failed)"
  tail -n 3 "$OUT"/logs/vanilla_s*.log
  timeout -s INT $(( $(left) - 10 )) python3 scripts/pocket2_liveness.py --out "$OUT/pocket2_liveness.json" \
    "$OUT"/runs/pocket2_vanilla_s* $held 2>&1 | tee "$OUT/logs/liveness.log"
  local summarised=$?
  phase "held-out evaluations and liveness summary done"
  rm -rf "$OUT"/runs/*/checkpoints "$OUT"/runs/*/.lock   # the runs come back without checkpoints and locks
  [ "$failed" = 0 ] && [ "$summarised" = 0 ]
}

case $stage in
  build) build_stage ;;
  live) live_stage "gradient_quarantine/pocket2_model" ;;
  all) build_stage && live_stage "$work/build1" ;;
esac
rc=$?
python3 - "$OUT" "$stage" "$smoke" "$SECONDS" "$rc" "$ngpu" "$mps" <<'PY'
import json, sys
from pathlib import Path
out, stage, smoke, seconds, rc, ngpu, mps = sys.argv[1:]
made = sorted(p.name for p in Path(out).glob("pocket2_*.json"))
(Path(out)/f"pocket2_session_{stage}.json").write_text(json.dumps(
    {"stage": stage, "smoke": smoke == "1", "seconds": int(seconds), "exit": int(rc), "gpus": int(ngpu),
     "mps": mps == "1", "summaries": made}, indent=1) + "\n")
PY
echo "pocket2 session ($stage) exit $rc after $SECONDS s; results in $OUT:"; ls "$OUT"
nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv 2>/dev/null || true
pack=$(mktemp -d /tmp/pocket2_pack.XXXXXX)     # one archive in parts under 16 MiB: see the head of this script
tar czf "$pack/session.tgz" -C "$OUT" . && find "$OUT" -mindepth 1 -delete && split -b 15M "$pack/session.tgz" \
  "$OUT/session.tgz." || { echo "packing $OUT failed" >&2; rc=1; }
rm -rf "$pack"; ls -l "$OUT"
exit $rc
