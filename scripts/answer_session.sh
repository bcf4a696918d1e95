#!/usr/bin/env bash
# One call of a pre-registered grid on a lent GPU machine: the second grid (runs/answer/, tranches 1-3) or its
# confirmation (GRID=runs/confirm TRANCHES=4). The carried wheels (.whl) give papermill, its kernel and the sandbox's
# bubblewrap and libseccomp bindings; carried Debian packages (.debs) give libseccomp itself where the image lacks it.
# A fresh machine starts from the committed grid, restores the last snapshot of work not yet committed
# (SNAP/*.tar.gz, carried when there is one) and resumes. scripts/run_answer.py runs in its own session, so it outlives
# the call. Waits up to SECONDS, then snapshots to $OUT what changed since the last call (scripts/grid_snapshot.py):
# unpack every call's state.tar.gz, in order (scripts/grid_unpack.py).
# Usage, from the repository root on the device:
#   [JOBS=24] [GRID=runs/confirm TRANCHES=4 SNAP=.confirmsnap] bash scripts/answer_session.sh 540
# The pocket2 grid (nbs/90f_pocket2_answer.ipynb), 12 side by side on one H200 (about 5.5 runs a minute), with what the
# call does not need set aside here first so that the tree stays under 64 MiB (scripts/device_aside.sh aside, then
# back after the call; unpack every call's state.tar.gz in one command):
#   JOBS=12 GRID=runs/pocket2 TRANCHES=pocket2 SNAP=.pocket2snap bash scripts/answer_session.sh 540
# (JOBS: runs side by side, spread over the GPUs that nvidia-smi lists)
set -u
secs=${1:-540}
grid=${GRID:-runs/answer} tranches=${TRANCHES:-1,2,3} snap=${SNAP:-.answersnap}
work=/root/gq
if [ ! -d /tmp/site/papermill ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    || exit 1
fi
if ! ldconfig -p | grep -q libseccomp.so.2; then
  for f in .debs/*.deb; do [ -f "$f" ] && dpkg -x "$f" /; done; ldconfig
fi
export PYTHONPATH=/tmp/site:$work PYTHONUNBUFFERED=1
if [ ! -d $work ]; then
  mkdir -p $work/runs && cp -r $(ls -A | grep -v -E '^(\.whl|\.debs|\.git|\.answersnap|\.confirmsnap|runs)$') $work/
  cp -r runs/grid $work/runs/                             # the monitoring subset the horizon's curves are scored on
  [ -d $grid ] && cp -r $grid $work/runs/
  mkdir -p $work/$grid/logs                               # the committed runs, then the snapshot
  touch $work/.restored                                   # files older than this came with the machine's start
  for t in $snap/*.tar.gz; do [ -f "$t" ] && tar xzmf "$t" -C $work; done   # m: newer than .restored
  echo "restored $(ls $work/$grid | wc -l) entries into $work/$grid"
fi
cd $work
python3 -c "from gradient_quarantine import sandbox as s
print('engine problem:', s.engine_problem(), '| warm workers problem:', s.warm_problem())
s.seccomp_filter(); print('seccomp filter: built')" || exit 1
done_before() { grep -q "answer grid done: .* 0 failed" $grid/logs/answer.out 2>/dev/null; }
if ! pgrep -f "scripts/run_answer.py" >/dev/null && ! done_before; then
  setsid nohup python3 scripts/run_answer.py --jobs ${JOBS:-12} --tranches $tranches >> $grid/logs/answer.out 2>&1 \
    < /dev/null &
fi
end=$((SECONDS + secs))
sleep 5
while [ $SECONDS -lt $end ] && pgrep -f "scripts/run_answer.py" >/dev/null; do sleep 10; done
since=.restored; [ -f .snapped ] && since=.snapped         # each call returns what changed since the last one
touch .snapping
python3 scripts/grid_snapshot.py $grid "$OUT" $since "h200_*"   # only the horizon gets eval curves
mv .snapping .snapped
tail -n 12 $grid/logs/answer.out; grep -c "exit 0" $grid/logs/answer.out; uptime
nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv
