"""Whether the grading paths change a run: the same short pocket run (route2b, seed 7, 3 updates, 16 test problems) on
the CPU with warm sandbox workers and the verdict cache (the default), with a fresh bubblewrap per program
(GQ_SANDBOX=cold), and with no verdict cache. Metrics (timing fields aside), rollouts, evaluations and knobs must be
bit-identical; the cache's hits are reported.

From the repository root:  PYTHONPATH=$PWD python benchmarks/grading/run_identity.py
Writes run_identity.json and run_identity.md beside this file (or to --out). --smoke: the same three paths on a tiny
run (smoke.SMOKE_RUN: the smoke preset, one update, one test problem), to a temporary folder.
"""
import argparse, atexit, gzip, json, os, shutil, subprocess, sys, tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT/"benchmarks"))
from provenance import footer, provenance, results_dir
from smoke import SMOKE_RUN

RUNS = {"pocket": {"preset": "pocket", "seed": 7, "steps": 3, "eval_n": 16},   # the run each path makes
        "smoke": {**SMOKE_RUN, "seed": 7}}
RUN = r'''
import json, sys
from gradient_quarantine.config import resolve_config
from gradient_quarantine.train import Trainer, grade_rollouts
cfg = resolve_config(run_dir=sys.argv[1], **json.loads(sys.argv[3]))
trainer = Trainer(cfg, grader=grade_rollouts if sys.argv[2] == "no_cache" else None, progress=False)
trainer.run()
cache = trainer.verdicts
print("CACHE " + json.dumps({"hits": cache.hits if cache else 0, "misses": cache.misses if cache else 0}))
'''
PATHS = {"warm, cache": ({}, "cache"), "cold, cache": ({"GQ_SANDBOX": "cold"}, "cache"),
         "warm, no cache": ({}, "no_cache")}

def run(name: str, work: Path, spec: dict) -> dict:
    env_extra, cache = PATHS[name]
    run_dir = work/name.replace(", ", "_").replace(" ", "_")
    env = {**{k: v for k, v in os.environ.items() if k != "GQ_SANDBOX"}, **env_extra,
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", RUN, str(run_dir), cache, json.dumps(spec)], capture_output=True,
                          text=True, env=env, cwd=ROOT)
    if done.returncode: raise RuntimeError(f"{name} failed:\n{done.stderr[-3000:]}")
    counts = json.loads([l for l in done.stdout.splitlines() if l.startswith("CACHE ")][-1][6:])
    return {"dir": run_dir, "cache": counts}

def contents(run_dir: Path, steps: int) -> dict:
    from safetensors.torch import load_file
    metrics = [{k: v for k, v in json.loads(l).items() if not k.startswith("s_")}
               for l in (run_dir/"metrics.jsonl").read_text().splitlines()]
    knobs = load_file(run_dir/"checkpoints"/f"update_{steps:04d}.safetensors")
    return {"metrics": json.dumps(metrics), "rollouts": gzip.open(run_dir/"rollouts.jsonl.gz", "rt").read(),
            "evals": [(run_dir/"eval"/f"{s}.json").read_text() for s in ("deploy", "trained")],
            "knobs": {k: v.numpy().tobytes() for k, v in knobs.items()}}

if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=None, help="folder for the results (default: beside this script)")
    ap.add_argument("--smoke", action="store_true", help="the smoke preset, one update: checks the script")
    a = ap.parse_args()
    out, spec, meta = results_dir(a.out, a.smoke, __file__), RUNS["smoke" if a.smoke else "pocket"], provenance()
    work = Path(tempfile.mkdtemp(prefix="gq_identity_")); atexit.register(shutil.rmtree, work, True)
    runs = {name: run(name, work, spec) for name in PATHS}
    reference = contents(runs["warm, cache"]["dir"], spec["steps"])
    rows, record = [], {}
    for name, r in runs.items():
        got = contents(r["dir"], spec["steps"])
        same = {part: got[part] == reference[part] for part in reference}
        record[name] = {"identical_to_default": same, "cache": r["cache"]}
        rows.append(f"| {name} | {' | '.join('yes' if same[p] else 'NO' for p in reference)} | "
                    f"{r['cache']['hits']} of {r['cache']['hits'] + r['cache']['misses']} |")
    table = "\n".join(["| path | metrics | rollouts | evaluations | knobs "
                       "| cache hits (training and evaluation gradings) |",
                       "|---|---|---|---|---|---|", *rows])
    out.mkdir(parents=True, exist_ok=True)
    (out/"run_identity.json").write_text(json.dumps({"provenance": meta, "run": spec, "paths": record}, indent=1)
                                         + "\n")
    (out/"run_identity.md").write_text(f"# One {spec['preset']} run on three grading paths (CPU)\n\nroute2b, seed "
                                       f"{spec['seed']}, {spec['steps']} updates, {spec['eval_n']} test problems; "
                                       "compared with the default path bit for bit (metrics without their timing "
                                       f"fields).\n\n{table}\n\n{footer(meta)}\n")
    print(table)
    sys.exit(0 if all(all(v["identical_to_default"].values()) for v in record.values()) else 1)
