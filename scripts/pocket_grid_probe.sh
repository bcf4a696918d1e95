#!/usr/bin/env bash
# Several pocket runs side by side on one GPU host (the experiment grids use the same pattern); prints a compact summary
# per run.
# Usage: scripts/pocket_grid_probe.sh OUTDIR "name|param=value param=value" ...
out=$1; shift
for spec in "$@"; do
  name=${spec%%|*}; params=${spec#*|}
  python3 - "$out/$name" $params > "$out/$name.log" 2>&1 <<'PY' &
import sys, json
from gradient_quarantine.artifacts import read_jsonl
from gradient_quarantine.config import resolve_config
from gradient_quarantine.train import Trainer
run_dir, kv = sys.argv[1], dict(a.split("=", 1) for a in sys.argv[2:])
def value(v):
    try: return json.loads(v)
    except ValueError: return v                      # a bare word, e.g. granularity=token
kv = {k: value(v) for k, v in kv.items()}
res = Trainer(resolve_config(kv.pop("preset", "pocket"), run_dir=run_dir, **kv), progress=False).run()
rows = read_jsonl(f"{run_dir}/metrics.jsonl")
print("SUMMARY", run_dir.split("/")[-1], json.dumps({"hack_by_update": [round(r["train_hack"], 3) for r in rows],
      "solve_by_update": [round(r["train_solve"], 3) for r in rows], "frout": [round(r["frout"], 3) for r in rows][-3:],
      "eval": {s: (round(r["hack"], 3), round(r["solve"], 3), r["n"],
                   {m: round(x["hack"], 3) for m, x in r["by_mode"].items()}) for s, r in res.items()},
      "seconds_per_update": round(sum(r["s_generate"] + r["s_grade"] + r["s_backward"] + r["s_optimizer"] for r in rows)
                                  / len(rows), 2)}))
PY
done
wait
grep -h SUMMARY "$out"/*.log; grep -h -A3 Traceback "$out"/*.log | head -20
