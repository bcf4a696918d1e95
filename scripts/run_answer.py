"""The second grid (runs/answer/): vanilla, route2b per rollout, and the uniform split and random-V matched to
route2b of the same seed, under the conserving optimiser, on the pocket substrate, seeds 100-119. The design and its
tests are pre-registered in nbs/90b_answer.ipynb.

Every cell is `papermill nbs/05_train.ipynb runs/answer/<arm>_s<seed>.ipynb`; a control starts as soon as its seed's
route2b run is complete. Seeds start in ascending order, at most jobs/2 at a time (two runs each), so a grid cut short
holds the lowest seeds of every arm. A complete
cell is skipped, so rerunning resumes. runs/answer/answer.json records the host and every cell's command, times and
exit code.

Usage, from the repository root (GPU host or CPU):  python scripts/run_answer.py --jobs 12 [--dry-run] [--seeds 100-119]
"""
import argparse, concurrent.futures as cf, json, os, platform, subprocess, sys, threading, time
from pathlib import Path

ANSWER_DIR = Path("runs/answer")
ARMS = ("vanilla", "route2b", "uniform", "random_v")

def complete(run: Path) -> bool:
    status = run/"status.json"
    return status.exists() and json.loads(status.read_text()).get("complete", False)

class Answer:
    def __init__(self, seeds: list[int], jobs: int, dry_run: bool):
        self.seeds, self.dry_run, self.lock = seeds, dry_run, threading.Lock()
        self.jobs, self.pool = jobs, cf.ThreadPoolExecutor(max_workers=jobs)
        self.record = {"host": {"node": platform.node(), "cpus": os.cpu_count()}, "jobs": jobs, "seeds": seeds,
                       "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "cells": {}}
        (ANSWER_DIR/"logs").mkdir(parents=True, exist_ok=True)

    def save(self):
        if self.dry_run: return
        with self.lock:
            path, tmp = ANSWER_DIR/"answer.json", ANSWER_DIR/f".answer.json.{os.getpid()}.tmp"
            old = json.loads(path.read_text())["processes"] if path.exists() else []
            mine = {**self.record, "id": f"{self.record['started']} pid {os.getpid()}"}
            processes = [p for p in old if p["id"] != mine["id"]] + [mine]
            tmp.write_text(json.dumps({"processes": processes}, indent=1) + "\n")
            tmp.replace(path)

    def cell(self, arm: str, seed: int) -> int:
        name = f"{arm}_s{seed}"
        if complete(ANSWER_DIR/name) and (ANSWER_DIR/f"{name}.ipynb").exists(): return 0
        params = {"preset": "pocket", "arm": arm, "seed": seed}
        if arm in ("uniform", "random_v"): params["reference_run"] = str(ANSWER_DIR/f"route2b_s{seed}")
        cmd = [sys.executable, "-m", "papermill", "nbs/05_train.ipynb", str(ANSWER_DIR/f"{name}.ipynb"),
               "-y", json.dumps(params), "--no-progress-bar"]
        entry = {"command": " ".join(cmd[1:]), "start": time.time()}
        with self.lock: self.record["cells"][name] = entry
        if self.dry_run: print("would run:", entry["command"], flush=True); return 0
        with open(ANSWER_DIR/"logs"/f"{name}.log", "w") as log:
            env = {**os.environ, "OMP_NUM_THREADS": "1"}
            rc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, env=env).returncode
        entry.update(end=time.time(), seconds=round(time.time() - entry["start"], 1), returncode=rc)
        print(f"{name}: exit {rc} after {entry['seconds']} s", flush=True)
        self.save()
        return rc

    def seed_cells(self, seed: int) -> list[int]:
        "route2b and vanilla of one seed side by side, then the two controls matched to that route2b."
        route2b, vanilla = self.pool.submit(self.cell, "route2b", seed), self.pool.submit(self.cell, "vanilla", seed)
        if route2b.result() != 0: return [route2b.result(), vanilla.result()]
        controls = [self.pool.submit(self.cell, arm, seed) for arm in ("uniform", "random_v")]
        return [route2b.result(), vanilla.result()] + [c.result() for c in controls]

    def run(self) -> int:
        seeds = cf.ThreadPoolExecutor(max_workers=max(1, self.jobs // 2))   # seeds in flight, two runs each at most
        codes = [rc for f in [seeds.submit(self.seed_cells, s) for s in self.seeds] for rc in f.result()]
        self.record["finished"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()); self.save()
        failed = sum(rc != 0 for rc in codes)
        print(f"answer grid done: {len(codes) - failed} ok, {failed} failed", flush=True)
        return failed

def seed_range(text: str) -> list[int]:
    lo, _, hi = text.partition("-")
    return list(range(int(lo), int(hi or lo) + 1))

if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=max(1, (os.cpu_count() or 2) * 3 // 4), help="runs side by side")
    ap.add_argument("--seeds", type=seed_range, default=seed_range("100-119"), help="a seed or a range, e.g. 100-119")
    ap.add_argument("--dry-run", action="store_true", help="print the papermill commands without running them")
    a = ap.parse_args()
    sys.exit(1 if Answer(a.seeds, a.jobs, a.dry_run).run() else 0)
