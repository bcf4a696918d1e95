#!/usr/bin/env bash
# One device call of the full preset's speed benchmarks on one GPU, results to $OUT (each stage's output streams to
# $OUT/<stage>.log); ask for an H200: the merged knob path holds a bf16 copy of the weights (about 8 GiB) beside the
# 69 GiB a learning step peaked at. Two stages, each under the 10 minutes a call may take:
#   learn   benchmarks/learn_step/learn_step.py (the learning micro-batch: masks, fused norms, the merged knob path;
#           then both knob paths' bf16 precision against fp32 on the full configuration) and floor.py --measure (the
#           floor at the rate this GPU's bf16 products reach), about 4 minutes;
#   update  benchmarks/gpu_update/gpu_update.py: one full update, then vanilla and route2b per rollout learning on the
#           separate and the merged knob path from the same rollouts, about 7 minutes.
# The LeetCode files travel in a carried folder (.lc, git-excluded; the GPU hosts reach no network), the wheels (.whl)
# give fastcore and the sandbox's bubblewrap and libseccomp bindings, and .debs libseccomp itself:
#   mkdir -p .lc && cp ../shared/data/leetcode/* .lc/                               # once, here
#   GQ_COMMIT=<HEAD here> bash scripts/speed_session.sh learn     # carry .whl .debs .lc; the copy's .git can be stale
#   bash scripts/speed_session.sh update
set -u -o pipefail
: "${OUT:?OUT must name the folder the results go to}"
stage=${1:?usage: bash scripts/speed_session.sh learn | update}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  || exit 1
if ! ldconfig -p | grep -q libseccomp.so.2; then for f in .debs/*.deb; do dpkg -x "$f" /; done; ldconfig; fi
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 GQ_DATA_DIR=$PWD/.lc
export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
case $stage in
  learn)
    python3 benchmarks/learn_step/learn_step.py --out "$OUT/learn_step" 2>&1 | tee "$OUT/learn.log" || exit 1
    python3 benchmarks/learn_step/floor.py --measure --out "$OUT/floor" 2>&1 | tee -a "$OUT/learn.log" ;;
  update)
    python3 benchmarks/gpu_update/gpu_update.py --out "$OUT/gpu_update" \
      --arms vanilla vanilla+merged route2b/rollout route2b/rollout+merged 2>&1 | tee "$OUT/update.log" ;;
  *) echo "unknown stage $stage: learn | update" >&2; exit 2 ;;
esac
