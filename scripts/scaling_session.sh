#!/usr/bin/env bash
# One device call for benchmarks/gpu_scaling on a lent machine with two or more GPUs: the full preset's own token caps,
# one warm-up and UPDATES timed updates on each process count in GPUS (default "1 2"), results to $OUT; each count's
# output streams to $OUT/gpu_scaling_<N>.log. One call for both 1 and 2 GPUs ran past the 585 s a call may take, so
# measure one count a call with the same STREAMS, the second with FROM naming the first's gpu_scaling.json (committed
# or carried): it is copied into $OUT and the new count merged into it (--merge refuses results of another run).
# The LeetCode files travel in a carried folder (.lc, git-excluded; the GPU hosts reach no network), the wheels (.whl)
# give fastcore and the sandbox's bubblewrap and libseccomp bindings, and .debs libseccomp itself.
#   mkdir -p .lc && cp ../shared/data/leetcode/* .lc/                               # once, here
#   GPUS=1 STREAMS=2 bash scripts/scaling_session.sh                                # call 1, carry .whl .debs .lc
#   GPUS=2 STREAMS=2 FROM=benchmarks/gpu_scaling/gpu_scaling.json bash scripts/scaling_session.sh     # call 2
set -u -o pipefail
: "${OUT:?OUT must name the folder the results go to}"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  || exit 1
if ! ldconfig -p | grep -q libseccomp.so.2; then for f in .debs/*.deb; do dpkg -x "$f" /; done; ldconfig; fi
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 GQ_DATA_DIR=$PWD/.lc
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
merge=()
if [ -n "${FROM:-}" ]; then cp "$FROM" "$OUT/gpu_scaling.json" && merge=(--merge) || exit 1; fi
# shellcheck disable=SC2086
python3 benchmarks/gpu_scaling/gpu_scaling.py --gpus ${GPUS:-1 2} ${STREAMS:+--streams $STREAMS} --warmup 1 \
  --updates "${UPDATES:-1}" --out "$OUT" "${merge[@]}" 2>&1 | tee "$OUT/gpu_scaling.log"
