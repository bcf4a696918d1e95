#!/usr/bin/env bash
# One call of the issue-8 grid on a lent GPU machine: set a fresh machine up from the last snapshot (.gridsnap/state.tar.gz, resume_*.tar.gz),
# keep scripts/run_grid.py running in its own session, wait up to SECONDS, then write snapshots to $OUT (scripts/grid_snapshot.py).
# Usage, from the repository root on the device:  bash scripts/grid_session.sh 540
set -u
secs=${1:-540}
work=/root/gq
if [ ! -d /tmp/site/papermill ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
fi
export PYTHONPATH=/tmp/site:$work PYTHONUNBUFFERED=1
if [ ! -d $work ]; then
  mkdir -p $work && cp -r $(ls -A | grep -v -E '^(\.whl|\.git|\.gridsnap|runs)$') $work/ && mkdir -p $work/runs/grid_logs
  for t in .gridsnap/state.tar.gz .gridsnap/resume_*.tar.gz; do [ -f "$t" ] && tar xzf "$t" -C $work; done
  echo "restored $(ls $work/runs | wc -l) entries"
fi
cp -r nbs scripts $work/                      # notebook fixes reach the next papermill call (never the runs)
cd $work
if ! pgrep -f scripts/run_grid.py >/dev/null; then
  if grep -q "grid done: .* 0 failed" runs/grid_logs/grid.out 2>/dev/null; then echo "GRID DONE"
  else setsid nohup python3 scripts/run_grid.py --jobs 12 >> runs/grid_logs/grid.out 2>&1 < /dev/null & fi
fi
if [ ! -f runs/grid_logs/pocket_base_rates_k8.json ] && ! pgrep -f pocket_base_rates.py >/dev/null; then
  setsid nohup python3 scripts/pocket_base_rates.py --model gradient_quarantine/pocket_model --samples 8 \
    --out runs/grid_logs/pocket_base_rates_k8.json > runs/grid_logs/base_rates.out 2>&1 < /dev/null &
fi
if [ -f runs/route2b_s43/status.json ] && ! pgrep -f "run_grid.py --extra" >/dev/null && ! grep -q "extra cells done: 6 ok" runs/grid_logs/extra.out 2>/dev/null; then
  setsid nohup python3 scripts/run_grid.py --extra --jobs 6 >> runs/grid_logs/extra.out 2>&1 < /dev/null &
fi
repo=$OLDPWD                                  # the synced checkout: the CUDA-graph check of the fast generator runs from it
if [ ! -f runs/grid_logs/gpuquick/done ] && ! pgrep -f benchmarks/gpu.py >/dev/null && [ "$(pgrep -fc papermill)" -lt 8 ]; then
  mkdir -p runs/grid_logs/gpuquick
  (cd $repo && PYTHONPATH=$repo:/tmp/site setsid nohup bash -c "timeout 500 python3 benchmarks/gpu.py --quick --device cuda --out $work/runs/grid_logs/gpuquick \
    > $work/runs/grid_logs/gpuquick/out.txt 2>&1; touch $work/runs/grid_logs/gpuquick/done" < /dev/null > /dev/null 2>&1 &)
fi
sleep 5
end=$((SECONDS + secs))
while [ $SECONDS -lt $end ] && pgrep -f "scripts/run_grid.py|benchmarks/gpu.py" >/dev/null; do sleep 10; done
tail -3 runs/grid_logs/extra.out 2>/dev/null; ls runs/grid_logs/gpuquick 2>/dev/null
python3 scripts/grid_snapshot.py runs "$OUT"
tail -4 runs/grid_logs/grid.out; grep -c . runs/grid_logs/grid.out; uptime
