"""Grid throughput: complete pocket runs per minute on one host, several paths measured in turn in one invocation.

Paths (`--paths`, each NAME, NAME:JOBS for JOBS runs side by side instead of --jobs, or NAME:JOBS:RUNS for RUNS runs
instead of --runs):
- old: the code of --old DIR (a copy of the package before the throughput work), warm sandbox, no MPS, as the grid
  ran;
- cold: a fresh bubblewrap per program (GQ_SANDBOX=cold), each run its own CUDA context, which the GPU time-slices;
- warm: the warm sandbox workers, each run its own CUDA context;
- new: the warm sandbox, and the runs' CUDA contexts share the GPU through a CUDA MPS control daemon that the script
  starts for the round and stops after it, so kernels of different runs execute at the same time, as
  scripts/run_answer.py runs the grid.

A run is `python -m gradient_quarantine.train --preset pocket --arm ARM --seed S` into a fresh directory: 50 updates,
then the evaluation on all 468 test problems (deploy and as-trained), as the grid runs them. Each path runs --runs runs
(distinct seeds, the same on every path), its jobs at a time, with one torch thread and max(2, 2 * cores / jobs)
graders each, as scripts/run_answer.py gives them; the paths alternate in --rounds rounds (A B C, then C B A, ...), so a
drift of the host hits every path. runs_per_min counts finished runs over the wall time of the path's rounds. Beside
each round the script samples the host's CPU busy share (/proc/stat) and the GPU's utilisation (nvidia-smi, once a
second). A run whose logged rollouts timed out on more than 1% of their programs measured a starved grader, and the
script says so; each run's deploy hack and solve are recorded, so the paths can be compared seed by seed.

On a GPU host, from the repository root (OLD: e.g. `git archive BASE gradient_quarantine | tar -x -C OLD`):
    PYTHONPATH=$PWD python benchmarks/grid_throughput/grid_throughput.py --old OLD --paths old new new:16 --runs 16
--smoke checks the script on the CPU in seconds: one tiny run (smoke.SMOKE_RUN) on each of the paths cold and warm, one
at a time, one round, to a temporary folder (the new path needs CUDA MPS, the old one a copy of old code: left out; the
GPU column is empty without nvidia-smi).
Writes NAME.json (runs_per_min: the fastest path's) and NAME.md to --out (default: beside this script; NAME: --name,
else grid_throughput).
"""
import argparse, atexit, contextlib, gzip, json, os, platform, shutil, statistics, subprocess, sys, tempfile, threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT/"benchmarks")]
from gradient_quarantine.launch import mps_daemon  # noqa: E402
from provenance import footer, provenance, results_dir  # noqa: E402
from smoke import SMOKE_RUN, cli_args  # noqa: E402

PATHS = {"old": {}, "cold": {"GQ_SANDBOX": "cold"}, "warm": {}, "new": {}}
WITH_MPS = ("new",)

def path_jobs(spec: str, a) -> tuple[str, int, int]:
    "A --paths entry NAME[:JOBS[:RUNS]] as (name, runs side by side, runs)."
    name, jobs, runs = (spec.split(":") + ["", ""])[:3]
    if name not in PATHS: sys.exit(f"unknown path {name!r}: expected one of {', '.join(PATHS)}")
    if name == "old" and a.old is None: sys.exit("the old path needs --old DIR (a copy of the package before)")
    return name, int(jobs) if jobs else a.jobs, int(runs) if runs else a.runs

def sums(run_dir: Path) -> dict:
    "Training seconds by phase, summed over the run's updates."
    rows = [json.loads(l) for l in (run_dir/"metrics.jsonl").read_text().splitlines() if l.strip()]
    return {k: sum(r[k] for r in rows) for k in ("s_generate", "s_grade", "s_backward", "s_optimizer")}

def one_run(seed: int, run_dir: Path, spec: str, extra_env: dict, a) -> dict:
    "One complete run on a path; its wall time, exit code, timed-out share, training phases and evaluation."
    path, jobs, _ = path_jobs(spec, a)
    graders, root = max(2, 2 * (os.cpu_count() or 1) // jobs), a.old.resolve() if path == "old" else ROOT
    env = {**{k: v for k, v in os.environ.items() if k != "GQ_SANDBOX"}, **PATHS[path],
           **extra_env, "OMP_NUM_THREADS": "1", "GQ_GRADE_WORKERS": str(graders),
           "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")])}
    cmd = [sys.executable, "-m", "gradient_quarantine.train", "--preset", a.preset, "--arm", a.arm, "--seed",
           str(seed), "--run-dir", str(run_dir), *(["--steps", str(a.steps)] if a.steps else []), *a.train_args]
    t0 = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=root)
    seconds = time.perf_counter() - t0
    if done.returncode: return {"seed": seed, "returncode": done.returncode, "seconds": seconds,
                                "stderr": done.stderr[-1500:]}
    rollouts = [json.loads(l) for l in gzip.open(run_dir/"rollouts.jsonl.gz", "rt")]
    evals = {s: json.loads((run_dir/"eval"/f"{s}.json").read_text()) for s in ("deploy", "trained")
             if (run_dir/"eval"/f"{s}.json").exists()}
    timed_out = sum(r["timed_out"] for r in rollouts) / len(rollouts)
    return {"seed": seed, "returncode": 0, "seconds": seconds, "rollouts_timed_out": timed_out, **sums(run_dir),
            "deploy_hack": evals["deploy"]["hack"], "deploy_solve": evals["deploy"]["solve"]}

class HostSampler:
    "The host's CPU busy share over a block, and the GPU's utilisation sampled once a second (none without nvidia-smi)."
    def __enter__(self):
        self.cpu0, self.gpu, self.stop = self.cpu_times(), [], threading.Event()
        self.thread = threading.Thread(target=self.sample_gpu, daemon=True); self.thread.start()
        return self
    @staticmethod
    def cpu_times() -> tuple[int, int]:
        v = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
        return sum(v) - v[3] - v[4], sum(v)                    # busy (all but idle and iowait), total
    def sample_gpu(self):
        while not self.stop.wait(1.0):
            try: out = subprocess.run(["nvidia-smi", "--query-gpu=utilization.gpu", "--format=csv,noheader,nounits"],
                                      capture_output=True, text=True, timeout=5).stdout.split()
            except (FileNotFoundError, subprocess.TimeoutExpired): return
            if out: self.gpu.append(float(out[0]))
    def __exit__(self, *exc):
        self.stop.set(); self.thread.join()
        (b0, t0), (b1, t1) = self.cpu0, self.cpu_times()
        self.cpu_busy = (b1 - b0) / max(t1 - t0, 1)
        self.gpu_util = sum(self.gpu) / len(self.gpu) if self.gpu else None

def round_of(spec: str, seeds: list[int], work: Path, a) -> tuple[list[dict], float, dict]:
    "SEEDS' runs on a path, its jobs at a time: their records, the round's wall time and the host's load meanwhile."
    path, jobs, _ = path_jobs(spec, a)
    with mps_daemon(work/spec.replace(":", "_j")) if path in WITH_MPS else contextlib.nullcontext({}) as extra, \
         HostSampler() as host:
        t0 = time.perf_counter()
        with ThreadPoolExecutor(jobs) as pool:
            runs = list(pool.map(lambda s: one_run(s, work/f"{spec.replace(':', '_j')}_s{s}", spec, extra, a), seeds))
        wall = time.perf_counter() - t0
    return runs, wall, {"cpu_busy": host.cpu_busy, "gpu_util": host.gpu_util}

def median(xs: list[float]) -> float: return statistics.median(xs) if xs else float("nan")

def summarise(r: dict):
    "A path's runs per minute, failures, starved runs, load and median training phases, from its rounds."
    ok = [x for x in r["runs"] if x["returncode"] == 0]
    r.update(runs_per_min=len(ok) / (r["wall_s"] / 60), failed=len(r["runs"]) - len(ok),
             starved=[x["seed"] for x in ok if x["rollouts_timed_out"] > 0.01],
             median_run_s=median([x["seconds"] for x in ok]),
             **{f"median_{k}": median([x[k] for x in ok]) for k in ("s_generate", "s_grade", "s_backward")})

def report(a, out: dict) -> list[str]:
    rows = ["| path (jobs) | runs | failed | wall s | runs/min | median run s | generate s | grade wait s | learn s | "
            "host CPU busy | GPU util | runs starved (>1% timed out) |", "|---" * 12 + "|"]
    for p, r in out.items():
        gpu = "–" if r["gpu_util"] is None else f"{r['gpu_util']:.0f}%"
        rows.append(f"| {p.partition(':')[0]} ({path_jobs(p, a)[1]}) | {len(r['runs'])} | {r['failed']} | "
                    f"{r['wall_s']:.0f} | {r['runs_per_min']:.2f} | "
                    f"{r['median_run_s']:.0f} | {r['median_s_generate']:.1f} | {r['median_s_grade']:.1f} | "
                    f"{r['median_s_backward']:.1f} | {r['cpu_busy']:.0%} | {gpu} | {r['starved'] or 'none'} |")
    ends = {}                                           # seed -> the (deploy hack, solve) of each path that ran it
    for r in out.values():
        for x in r["runs"]:
            if x["returncode"] == 0: ends.setdefault(x["seed"], []).append((x["deploy_hack"], x["deploy_solve"]))
    shared = [e for e in ends.values() if len(e) > 1]
    rows.append(f"\nSeeds run on more than one path whose deploy hack and solve agree on all of them: "
                f"{sum(len(set(e)) == 1 for e in shared)} of {len(shared)}")
    if all(r["gpu_util"] is None for r in out.values()):
        rows.append("\nGPU util –: no GPU utilisation was read (no nvidia-smi on this host).")
    return rows

def main(a):
    for spec in a.paths: path_jobs(spec, a)               # a bad path or a missing --old fails before any run
    work = Path(tempfile.mkdtemp(prefix="gq_throughput_")); atexit.register(shutil.rmtree, work, True)
    total = {p: path_jobs(p, a)[2] for p in a.paths}
    order = [p for r in range(a.rounds) for p in (a.paths if r % 2 == 0 else a.paths[::-1])]
    seen = {p: [] for p in a.paths}
    out = {p: {"runs": [], "wall_s": 0.0, "rounds": []} for p in a.paths}
    for path in order:
        per_round = -(-total[path] // a.rounds)
        seeds = [a.first_seed + len(seen[path]) + i for i in range(min(per_round, total[path] - len(seen[path])))]
        if not seeds: continue
        seen[path] += seeds
        runs, wall, host = round_of(path, seeds, work, a)
        out[path]["runs"] += runs; out[path]["wall_s"] += wall; out[path]["rounds"].append({"wall_s": wall, **host})
        print(f"{path}: {len(runs)} runs in {wall:.0f} s, host CPU {host['cpu_busy']:.0%}, GPU {host['gpu_util']}",
              flush=True)
    for r in out.values():
        summarise(r)
        utils = [x["gpu_util"] for x in r["rounds"] if x["gpu_util"] is not None]
        r.update(cpu_busy=sum(x["cpu_busy"] * x["wall_s"] for x in r["rounds"]) / r["wall_s"],
                 gpu_util=sum(utils) / len(utils) if utils else None)
    record = {"provenance": a.provenance, "smoke": a.smoke, "train_args": a.train_args,
              "host": {"node": platform.node(), "cpus": os.cpu_count(), "gpu": gpu_name()}, "preset": a.preset,
              "arm": a.arm, "steps": a.steps, "jobs": a.jobs, "runs": a.runs, "rounds": a.rounds, "paths": out,
              "runs_per_min": max(r["runs_per_min"] for r in out.values())}
    rows = report(a, out)
    name = a.name or ("grid_throughput" if a.preset == "pocket" and not a.steps else f"grid_throughput_{a.preset}")
    a.out.mkdir(parents=True, exist_ok=True)
    (a.out/f"{name}.json").write_text(json.dumps(record, indent=1) + "\n")
    (a.out/f"{name}.md").write_text(f"# Grid throughput ({a.preset}, {a.arm}, "
                                    f"{record['host']['gpu'] or 'no GPU'}, {os.cpu_count()} cores)\n\n"
                                    + "\n".join(rows) + f"\n\n{footer(a.provenance)}\n")
    print("\n".join(rows))
    failed = [x for r in out.values() for x in r["runs"] if x["returncode"]]
    if a.smoke and failed: sys.exit(f"{len(failed)} runs failed, e.g.:\n{failed[0]['stderr']}")

def gpu_name() -> str | None:
    try: return subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                               text=True).stdout.strip() or None
    except FileNotFoundError: return None

if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=24, help="runs per path")
    ap.add_argument("--jobs", type=int, default=12)
    ap.add_argument("--rounds", type=int, default=2, help="alternations of the paths (A B C, then C B A, ...)")
    ap.add_argument("--paths", nargs="+", default=["cold", "warm", "new"], help="NAME or NAME:JOBS, NAME one of "
                    + ", ".join(PATHS))
    ap.add_argument("--old", type=Path, default=None, help="the directory holding the old gradient_quarantine package")
    ap.add_argument("--preset", default="pocket")
    ap.add_argument("--arm", default="vanilla")
    ap.add_argument("--steps", type=int, default=0, help="0: the preset's")
    ap.add_argument("--first-seed", type=int, default=1000)
    ap.add_argument("--name", default="", help="the output files' name (default grid_throughput)")
    ap.add_argument("--out", default=None, help="folder for the results (default: beside this script)")
    ap.add_argument("--smoke", action="store_true", help="one tiny run on the cold and warm paths: checks the script")
    a = ap.parse_args()
    a.out, a.provenance, a.train_args = results_dir(a.out, a.smoke, __file__), provenance(), []
    if a.smoke:
        a.preset, a.steps, a.runs, a.jobs, a.rounds, a.paths = "smoke", SMOKE_RUN["steps"], 1, 1, 1, ["cold", "warm"]
        a.train_args = cli_args({k: v for k, v in SMOKE_RUN.items() if k not in ("preset", "steps")})
    main(a)
