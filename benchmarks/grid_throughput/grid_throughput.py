"""Grid throughput: complete pocket runs per minute on one host, --jobs runs side by side, each path measured in turn in
one invocation (cold: a fresh bubblewrap per program, GQ_SANDBOX=cold; warm: the default warm sandbox workers).

A run is `python -m gradient_quarantine.train --preset pocket --arm vanilla --seed S` into a fresh directory: 50
updates, then the deploy and as-trained evaluation on all 468 test problems, as the grid runs them. Each path runs
--runs runs (distinct seeds), --jobs at a time, with one torch thread and max(2, 2 * cores / jobs) graders each, as
scripts/run_answer.py gives them; the paths alternate in --rounds rounds (A B B A ...), so a drift of the host hits
both. runs_per_min counts finished runs over the wall time of the path's rounds. A run whose evaluation or logged
rollouts timed out on more than 1% of their programs measured a starved grader, and the script says so.

On a GPU host, from the repository root:
    PYTHONPATH=$PWD python benchmarks/grid_throughput/grid_throughput.py --runs 24 --jobs 12
On CPUs, a check that the script works: --preset smoke --steps 2 --runs 2 --jobs 2
Writes grid_throughput.json (runs_per_min: the warm path's) and grid_throughput.md to --out.
"""
import argparse, gzip, json, os, platform, subprocess, sys, tempfile, time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PATHS = {"cold": {"GQ_SANDBOX": "cold"}, "warm": {}}

def one_run(seed: int, run_dir: Path, path: str, a) -> dict:
    "One complete run on PATH; its wall time, exit code and timed-out share."
    graders = max(2, 2 * (os.cpu_count() or 1) // a.jobs)
    env = {**{k: v for k, v in os.environ.items() if k != "GQ_SANDBOX"}, **PATHS[path], "OMP_NUM_THREADS": "1",
           "GQ_GRADE_WORKERS": str(graders),
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    cmd = [sys.executable, "-m", "gradient_quarantine.train", "--preset", a.preset, "--arm", "vanilla", "--seed",
           str(seed), "--run-dir", str(run_dir), *(["--steps", str(a.steps)] if a.steps else [])]
    t0 = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT)
    seconds = time.perf_counter() - t0
    if done.returncode: return {"seed": seed, "returncode": done.returncode, "seconds": seconds,
                                "stderr": done.stderr[-1500:]}
    rollouts = [json.loads(l) for l in gzip.open(run_dir/"rollouts.jsonl.gz", "rt")]
    evals = [json.loads((run_dir/"eval"/f"{s}.json").read_text()) for s in ("deploy", "trained")]
    timed_out = sum(r["timed_out"] for r in rollouts) / len(rollouts)
    return {"seed": seed, "returncode": 0, "seconds": seconds, "rollouts_timed_out": timed_out,
            "deploy_hack": evals[0]["hack"], "deploy_solve": evals[0]["solve"]}

def round_of(path: str, seeds: list[int], work: Path, a) -> tuple[list[dict], float]:
    "SEEDS' runs on PATH, --jobs at a time: their records and the round's wall time."
    t0 = time.perf_counter()
    with ThreadPoolExecutor(a.jobs) as pool:
        runs = list(pool.map(lambda s: one_run(s, work/f"{path}_s{s}", path, a), seeds))
    return runs, time.perf_counter() - t0

def main(a):
    work = Path(tempfile.mkdtemp(prefix="gq_throughput_"))
    per_round = -(-a.runs // a.rounds)
    order = [p for r in range(a.rounds) for p in (a.paths if r % 2 == 0 else a.paths[::-1])]
    seen = {p: [] for p in a.paths}
    out = {p: {"runs": [], "wall_s": 0.0} for p in a.paths}
    for path in order:
        seeds = [a.first_seed + len(seen[path]) + i for i in range(min(per_round, a.runs - len(seen[path])))]
        if not seeds: continue
        seen[path] += seeds
        runs, wall = round_of(path, seeds, work, a)
        out[path]["runs"] += runs; out[path]["wall_s"] += wall
        print(f"{path}: {len(runs)} runs in {wall:.0f} s", flush=True)
    for p, r in out.items():
        ok = [x for x in r["runs"] if x["returncode"] == 0]
        r.update(runs_per_min=len(ok) / (r["wall_s"] / 60), failed=len(r["runs"]) - len(ok),
                 starved=[x["seed"] for x in ok if x["rollouts_timed_out"] > 0.01])
    record = {"host": {"node": platform.node(), "cpus": os.cpu_count()}, "preset": a.preset, "steps": a.steps,
              "jobs": a.jobs, "runs": a.runs, "rounds": a.rounds, "paths": out,
              "runs_per_min": out["warm"]["runs_per_min"] if "warm" in out else None}
    rows = ["| path | runs | failed | wall s | runs/min | runs starved (>1% timed out) |", "|---|---|---|---|---|---|"]
    rows += [f"| {p} | {len(r['runs'])} | {r['failed']} | {r['wall_s']:.0f} | {r['runs_per_min']:.2f} | "
             f"{r['starved'] or 'none'} |" for p, r in out.items()]
    name = "grid_throughput" if a.preset == "pocket" and not a.steps else f"grid_throughput_{a.preset}"
    a.out.mkdir(parents=True, exist_ok=True)
    (a.out/f"{name}.json").write_text(json.dumps(record, indent=1) + "\n")
    (a.out/f"{name}.md").write_text(f"# Grid throughput ({a.preset}, {a.jobs} runs side by side)\n\n"
                                    + "\n".join(rows) + "\n")
    print("\n".join(rows))

if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=24, help="runs per path")
    ap.add_argument("--jobs", type=int, default=12)
    ap.add_argument("--rounds", type=int, default=2, help="alternations of the paths (A B, then B A, ...)")
    ap.add_argument("--paths", nargs="+", default=list(PATHS), choices=list(PATHS))
    ap.add_argument("--preset", default="pocket")
    ap.add_argument("--steps", type=int, default=0, help="0: the preset's")
    ap.add_argument("--first-seed", type=int, default=1000)
    ap.add_argument("--out", type=Path, default=Path(__file__).parent)
    main(ap.parse_args())
