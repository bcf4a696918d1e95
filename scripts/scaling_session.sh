#!/usr/bin/env bash
# One device call for benchmarks/gpu_scaling on a lent machine with two or more GPUs: the full preset's own token caps,
# one warm-up and UPDATES timed updates on each process count in GPUS (default "1 2"), results to $OUT. The LeetCode
# files travel in a carried folder (.lc, git-excluded; the GPU hosts reach no network), the wheels (.whl) give
# fastcore and the sandbox's bubblewrap and libseccomp bindings, and .debs libseccomp itself where the image lacks it.
# The benchmark's own log is $OUT/gpu_scaling.log.
#   mkdir -p .lc && cp ../shared/data/leetcode/* .lc/        # once, here
#   [GPUS="1 2"] [UPDATES=1] bash scripts/scaling_session.sh  # on the device, carry [".whl", ".debs", ".lc"]
set -u -o pipefail
: "${OUT:?OUT must name the folder the results go to}"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  || exit 1
if ! ldconfig -p | grep -q libseccomp.so.2; then for f in .debs/*.deb; do dpkg -x "$f" /; done; ldconfig; fi
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 GQ_DATA_DIR=$PWD/.lc
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
# shellcheck disable=SC2086
python3 benchmarks/gpu_scaling/gpu_scaling.py --gpus ${GPUS:-1 2} --warmup 1 --updates "${UPDATES:-1}" --out "$OUT" \
  2>&1 | tee "$OUT/gpu_scaling.log"
