#!/usr/bin/env bash
# One call of the experiment grid (runs/grid/) on a lent GPU machine. A fresh machine is set up from the working tree
# (without runs/) and the last snapshot (.gridsnap/*.tar.gz, carried); scripts/run_grid.py and, once route2b per rollout
# is complete for seeds 41-43, its --extra cells run in their own sessions, so they outlive the call. Waits up to
# SECONDS, then snapshots runs/grid/ to $OUT (scripts/grid_snapshot.py). Usage, from the repository root on the device:
#   bash scripts/grid_session.sh 540
# The device has torch and transformers but not papermill, ipykernel, nbclient, nbformat, fastcore or plotly: carry them
# and the dependencies the device lacks as wheels in .whl (pip download ... --python-version 3.12, as the device tool's
# notes say).
set -u
secs=${1:-540}
work=/root/gq
# papermill and its kernel, carried as wheels (.whl, see the device tool's notes)
if [ ! -d /tmp/site/papermill ] || [ ! -d /tmp/site/fastcore ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl || exit 1
fi
export PYTHONPATH=/tmp/site:$work PYTHONUNBUFFERED=1
if [ ! -d $work ]; then
  mkdir -p $work && cp -r $(ls -A | grep -v -E '^(\.whl|\.git|\.gridsnap|runs)$') $work/ \
    && mkdir -p $work/runs/grid/grid_logs
  for t in .gridsnap/state.tar.gz .gridsnap/resume_*.tar.gz .gridsnap/rollouts_*.tar.gz; do
    [ -f "$t" ] && tar xzf "$t" -C $work
  done
  echo "restored $(ls $work/runs/grid | wc -l) entries into $work/runs/grid"
fi
# notebook and script fixes reach a warm machine's next papermill call (never the runs)
cp -r nbs scripts $work/
cd $work
complete() { grep -q '"complete": true' "runs/grid/$1/status.json" 2>/dev/null; }
if ! pgrep -f "scripts/run_grid.py --jobs" >/dev/null; then
  if grep -q "grid done: .* 0 failed" runs/grid/grid_logs/grid.out 2>/dev/null; then echo "GRID DONE"
  else setsid nohup python3 scripts/run_grid.py --jobs 12 >> runs/grid/grid_logs/grid.out 2>&1 < /dev/null & fi
fi
start_extra() {
  complete route2b_s41 && complete route2b_s42 && complete route2b_s43 && ! pgrep -f "run_grid.py --extra" >/dev/null \
    && ! grep -q "extra cells done: 6 ok" runs/grid/grid_logs/extra.out 2>/dev/null \
    && setsid nohup python3 scripts/run_grid.py --extra --jobs 6 >> runs/grid/grid_logs/extra.out 2>&1 < /dev/null &
}
end=$((SECONDS + secs))
sleep 5
while [ $SECONDS -lt $end ] && pgrep -f "scripts/run_grid.py" >/dev/null; do start_extra; sleep 10; done
start_extra
python3 scripts/grid_snapshot.py runs/grid "$OUT"
tail -n 3 runs/grid/grid_logs/extra.out 2>/dev/null; tail -n 6 runs/grid/grid_logs/grid.out
grep -c "exit 0" runs/grid/grid_logs/grid.out runs/grid/grid_logs/extra.out; uptime
