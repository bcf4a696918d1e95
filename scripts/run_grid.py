"""The first experiment grid on the pocket substrate, every run through papermill.

Each training cell is `papermill nbs/05_train.ipynb runs/grid/<name>.ipynb` (its run directory is `runs/grid/<name>/`),
followed by `papermill nbs/07_eval_curve.ipynb runs/grid/<name>/eval_curve.ipynb` on the frozen base-stratified
monitoring subset, each through `python -m gradient_quarantine.papermill_kernels` (papermill's command line; see
nbs/09_papermill_kernels.ipynb).
Phase 0 evaluates the base model on the whole test set and draws that subset (`nbs/06_eval.ipynb`). Phase 1 trains every
cell that needs no reference run. Phase 2 starts once both route2b granularities have finished for every seed: it picks
the better granularity (lower mean final deploy hack over the seeds; a tie goes to per-rollout) and trains the controls
matched to it (random-V and the uniform split, each referencing route2b at that granularity with the same seed) and
route2b with a frozen direction. `runs/grid/grid.json` lists one record per process of the script (a resumed grid adds
one): the host, every cell's command, times and exit code, and the granularity decision with its numbers.

Usage, from the repository root (GPU host or CPU):  python scripts/run_grid.py --jobs 12 [--dry-run] [--extra]
--extra runs only the cells added after the grid: random-V and the uniform split matched to route2b per rollout (seeds
41-43), because the granularity rule picked per-token, whose lower hack rate comes with a collapsed solve rate.
A cell already complete (status complete and its eval curve written) is skipped, so rerunning resumes a broken grid.
"""
import argparse, concurrent.futures as cf, fcntl, json, os, platform, statistics, subprocess, sys, threading, time
from pathlib import Path
from gradient_quarantine.results import GRID_DIR, REFERENCE_SEEDS, SEEDS, Results

HELD_OUT_SPLITS = {"pairs-rt-so": ["run_tests", "stdout_marker"], "pairs-se-fm": ["sentinel", "file_marker"]}
MONITORING_N = 117
GRID = Path(GRID_DIR)
MONITORING = f"{GRID}/monitoring_pocket_{MONITORING_N}.json"
SUFFIX = {"rollout": "", "token": "_token"}

def phase1_cells() -> list[tuple[str, dict]]:
    "Cells that need no reference run; both route2b granularities first, so that phase 2 can start early."
    cells = [(f"route2b{SUFFIX[g]}_s{s}", {"arm": "route2b", "granularity": g, "seed": s})
             for g in SUFFIX for s in SEEDS]
    cells += [(f"vanilla_s{s}", {"arm": "vanilla", "seed": s}) for s in SEEDS]
    cells += [(f"route2b_{tag}_s{s}", {"arm": "route2b", "seed": s, "pair_modes": modes})
              for tag, modes in HELD_OUT_SPLITS.items() for s in SEEDS]
    cells += [(f"gt_only_s{s}", {"arm": "gt_only", "seed": s}) for s in REFERENCE_SEEDS]
    return cells

def phase2_cells(g: str) -> list[tuple[str, dict]]:
    "The direction-free controls matched to route2b at granularity g, and route2b at g with a frozen direction."
    ref = lambda s: f"{GRID}/route2b{SUFFIX[g]}_s{s}"
    cells = [(f"random_v_s{s}", {"arm": "random_v", "granularity": g, "seed": s, "reference_run": ref(s)})
             for s in SEEDS]
    cells += [(f"uniform_s{s}", {"arm": "uniform", "granularity": g, "seed": s, "reference_run": ref(s)})
              for s in SEEDS]
    cells += [(f"route2b_frozen_s{s}", {"arm": "route2b", "granularity": g, "seed": s, "refresh_every": 0})
              for s in REFERENCE_SEEDS]
    return cells

def extra_cells() -> list[tuple[str, dict]]:
    "Beyond the issue's grid (--extra): random-V and the uniform split matched to route2b per rollout, seeds 41-43."
    ref = lambda s: f"{GRID}/route2b_s{s}"
    return [(f"{arm}_rollout_s{s}", {"arm": arm, "granularity": "rollout", "seed": s, "reference_run": ref(s)})
            for arm in ("random_v", "uniform") for s in REFERENCE_SEEDS]

def better_granularity() -> tuple[str, dict]:
    ("route2b's better granularity by the rule of `Results.better_granularity`, "
     "and the mean final deploy hacks it compared.")
    R = Results(GRID, "pocket")
    hack = {g: R.deploy(f"route2b/{g}") for g in SUFFIX}
    lacking = {g: sorted(set(SEEDS) - set(h)) for g, h in hack.items() if set(SEEDS) - set(h)}
    if lacking: raise FileNotFoundError(f"route2b runs not complete for seeds {lacking}")
    return R.better_granularity(), {g: statistics.fmean(h.values()) for g, h in hack.items()}

class Grid:
    def __init__(self, jobs: int, dry_run: bool, curves: bool = True):
        self.dry_run, self.curves, self.lock = dry_run, curves, threading.Lock()
        self.pool = cf.ThreadPoolExecutor(max_workers=jobs)
        self.monitoring_ready = threading.Event()
        self.record = {"host": {"node": platform.node(), "cpus": os.cpu_count(), "gpu": gpu_name()}, "jobs": jobs,
                       "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "cells": {}}
        self.record_id = f"{self.record['started']} pid {os.getpid()}"
        (GRID/"grid_logs").mkdir(parents=True, exist_ok=True)

    def save(self):
        ("Write this process's record into runs/grid/grid.json, keeping every other process's "
         "(a resumed grid, --extra beside it).")
        if self.dry_run: return                            # a dry run lists the commands and records nothing
        with self.lock, open(GRID/".grid.json.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            grid = GRID/"grid.json"
            others = [p for p in (json.loads(grid.read_text())["processes"] if grid.exists() else [])
                      if p.get("id") != self.record_id]
            tmp = GRID/".grid.json.tmp"
            tmp.write_text(json.dumps({"processes": others + [{"id": self.record_id, **self.record}]}, indent=1) + "\n")
            tmp.replace(grid)

    def papermill(self, key: str, notebook: str, out: str, params: dict) -> int:
        cmd = [sys.executable, "-m", "gradient_quarantine.papermill_kernels", notebook, out, "-y", json.dumps(params),
               "--no-progress-bar", "--log-output"]   # papermill with IPC kernels and a retried kernel start
        entry = {"command": " ".join(cmd[1:4] + cmd[4:5] + [f"'{json.dumps(params)}'"]), "start": time.time()}
        with self.lock: self.record["cells"][key] = entry
        if self.dry_run: print("would run:", entry["command"], flush=True); return 0
        with open(GRID/"grid_logs"/f"{key}.log", "w") as log:
            rc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT,
                                env={**os.environ, "OMP_NUM_THREADS": "1"}).returncode
        entry.update(end=time.time(), seconds=round(time.time() - entry["start"], 1), returncode=rc)
        print(f"{key}: exit {rc} after {entry['seconds']} s", flush=True)
        self.save()
        return rc

    def base(self):
        if not Path(MONITORING).exists():
            self.papermill("base_pocket", "nbs/06_eval.ipynb", f"{GRID}/base_pocket.ipynb",
                           {"preset": "pocket", "out": f"{GRID}/base_pocket/eval/base.json",
                            "monitoring_n": MONITORING_N, "subset_out": MONITORING})
        self.monitoring_ready.set()

    def cell(self, name: str, params: dict) -> int:
        run = GRID/name
        status = run/"status.json"
        # a complete run whose notebook failed after training reruns it (the run itself is skipped)
        notebook = GRID/f"{name}.ipynb"
        done = status.exists() and json.loads(status.read_text()).get("complete") and notebook.exists() \
            and not json.loads(notebook.read_text())["metadata"].get("papermill", {}).get("exception")
        # the kernel cannot see the name
        train = {"preset": "pocket", "run_dir": str(notebook.with_suffix("")), **params}
        rc = 0 if done else self.papermill(name, "nbs/05_train.ipynb", str(notebook), train)
        if rc == 0 and self.curves and not (run/"eval_curve.jsonl").exists():
            self.monitoring_ready.wait()
            rc = self.papermill(f"{name}.eval_curve", "nbs/07_eval_curve.ipynb", f"{run}/eval_curve.ipynb",
                                {"run_dir": str(run), "ids_file": MONITORING})
        return rc

    def run_extra(self):
        self.pool.submit(self.base)                        # the eval curves wait for the monitoring subset
        futures = [self.pool.submit(self.cell, name, params) for name, params in extra_cells()]
        failed = [f for f in futures if f.result() != 0]
        print(f"extra cells done: {len(futures) - len(failed)} ok, {len(failed)} failed", flush=True)
        return len(failed)

    def run(self):
        futures = [self.pool.submit(self.base)]
        phase1 = {name: self.pool.submit(self.cell, name, params) for name, params in phase1_cells()}
        futures += phase1.values()
        route2b = [phase1[f"route2b{SUFFIX[g]}_s{s}"] for g in SUFFIX for s in SEEDS]
        cf.wait(route2b)
        try: g, means = ("rollout", {}) if self.dry_run else better_granularity()
        except (FileNotFoundError, KeyError) as e:        # a route2b cell failed: phase 2 has no reference to match
            with self.lock: self.record["better_granularity"] = {"error": f"phase 2 not started: {e!r}"}
        else:
            with self.lock: self.record["better_granularity"] = {"granularity": g, "mean_final_deploy_hack": means,
                                                                 "seeds": SEEDS}
            futures += [self.pool.submit(self.cell, name, params) for name, params in phase2_cells(g)]
        self.save()
        failed = [f for f in futures if f.result() not in (0, None)]
        self.record["finished"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        self.save()
        print(f"grid done: {len(futures) - len(failed)} ok, {len(failed)} failed", flush=True)
        return len(failed)

def gpu_name() -> str | None:
    try:
        import torch
        return torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    except ImportError: return None

if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=max(1, (os.cpu_count() or 2) * 3 // 4), help="cells run side by side")
    ap.add_argument("--dry-run", action="store_true", help="print the papermill commands without running them")
    ap.add_argument("--extra", action="store_true",
                    help="run only the extra cells (controls matched to route2b per rollout)")
    ap.add_argument("--no-curves", action="store_true", help="train and evaluate only; no eval curves")
    a = ap.parse_args()
    grid = Grid(a.jobs, a.dry_run, curves=not a.no_curves)
    sys.exit(1 if (grid.run_extra() if a.extra else grid.run()) else 0)
