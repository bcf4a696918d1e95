#!/usr/bin/env bash
# One call of the second grid (runs/answer/) on a lent GPU machine. The carried wheels (.whl) give papermill and its
# kernel; a fresh machine starts from the committed runs/answer/, restores the last snapshot of work not yet committed
# (.answersnap/*.tar.gz, carried when there is one) and resumes. scripts/run_answer.py
# runs in its own session, so it outlives the call. Waits up to SECONDS, then snapshots runs/answer/ to $OUT
# (scripts/grid_snapshot.py).
# Usage, from the repository root on the device:  [JOBS=24] bash scripts/answer_session.sh 540 (JOBS: runs side by side,
# spread over the GPUs that nvidia-smi lists)
set -u
secs=${1:-540}
work=/root/gq
if [ ! -d /tmp/site/papermill ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    || exit 1
fi
export PYTHONPATH=/tmp/site:$work PYTHONUNBUFFERED=1
if [ ! -d $work ]; then
  mkdir -p $work/runs && cp -r $(ls -A | grep -v -E '^(\.whl|\.git|\.answersnap|runs)$') $work/
  cp -r runs/answer runs/grid $work/runs/ && mkdir -p $work/runs/answer/logs   # the committed runs, then the snapshot
  touch $work/.restored                                   # files older than this came with the machine's start
  for t in .answersnap/*.tar.gz; do [ -f "$t" ] && tar xzmf "$t" -C $work; done   # m: newer than .restored
  echo "restored $(ls $work/runs/answer | wc -l) entries into $work/runs/answer"
fi
cd $work
python3 -c "from gradient_quarantine import sandbox as s
print('engine problem:', s.engine_problem(), '| warm workers problem:', s.warm_problem())"
done_before() { grep -q "answer grid done: .* 0 failed" runs/answer/logs/answer.out 2>/dev/null; }
if ! pgrep -f "scripts/run_answer.py" >/dev/null && ! done_before; then
  setsid nohup python3 scripts/run_answer.py --jobs ${JOBS:-12} >> runs/answer/logs/answer.out 2>&1 < /dev/null &
fi
end=$((SECONDS + secs))
sleep 5
while [ $SECONDS -lt $end ] && pgrep -f "scripts/run_answer.py" >/dev/null; do sleep 10; done
python3 scripts/grid_snapshot.py runs/answer "$OUT" .restored "h200_*"   # only the horizon gets eval curves
tail -n 12 runs/answer/logs/answer.out; grep -c "exit 0" runs/answer/logs/answer.out; uptime
nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv
