"""The second grid (runs/answer/), both tranches pre-registered in nbs/90b_answer.ipynb, on the pocket substrate.

Tranche 1: vanilla, route2b per rollout, and the uniform split and random-V matched to route2b of the same seed, under
the conserving optimiser, seeds 100-119. Tranche 2: the cells of answer.TRANCHE2 (the uniform frontier, route2b's
bands, the per-knob optimiser's confound) for seeds 100-109.

Every cell is `papermill nbs/05_train.ipynb runs/answer/<cell>_s<seed>.ipynb`. Workers take the ready cell of lowest
(tranche, seed, position), so a grid cut short holds the lowest seeds of every cell; a tranche-1 control becomes ready
when its seed's route2b run is complete. A complete cell is skipped, so rerunning resumes. runs/answer/answer.json
records the host and every cell's command, times and exit code.

Usage, from the repository root (GPU host or CPU):
    python scripts/run_answer.py --jobs 12 [--dry-run] [--seeds 100-119] [--tranches 1,2]
"""
import argparse, heapq, json, os, platform, subprocess, sys, threading, time
from pathlib import Path
from gradient_quarantine.answer import TRANCHE2, TRANCHE2_SEEDS

ANSWER_DIR = Path("runs/answer")

def complete(run: Path) -> bool:
    status = run/"status.json"
    return status.exists() and json.loads(status.read_text()).get("complete", False)

def tranche_cells(tranche: int, seeds: list[int]) -> list[tuple]:
    "(priority, name, papermill parameters, the name of the run it needs first or None) for one tranche."
    if tranche == 2:
        return [((2, s, i), f"{cell}_s{s}", {"arm": c["arm"], "seed": s,
                                             "overrides": {k: v for k, v in c.items() if k != "arm"}}, None)
                for s in TRANCHE2_SEEDS for i, (cell, c) in enumerate(TRANCHE2.items())]
    out = []
    for s in seeds:
        out += [((1, s, 0), f"route2b_s{s}", {"arm": "route2b", "seed": s}, None),
                ((1, s, 1), f"vanilla_s{s}", {"arm": "vanilla", "seed": s}, None)]
        out += [((1, s, i), f"{arm}_s{s}", {"arm": arm, "seed": s, "reference_run": str(ANSWER_DIR/f"route2b_s{s}")},
                 f"route2b_s{s}") for i, arm in ((2, "uniform"), (3, "random_v"))]
    return out

class Answer:
    def __init__(self, cells: list[tuple], jobs: int, dry_run: bool):
        self.jobs, self.dry_run, self.lock = jobs, dry_run, threading.Condition()
        self.ready = [c for c in cells if c[3] is None]
        self.waiting = [c for c in cells if c[3] is not None]
        self.running, self.codes = 0, {}
        heapq.heapify(self.ready)
        self.record = {"host": {"node": platform.node(), "cpus": os.cpu_count()}, "jobs": jobs,
                       "cells_planned": [c[1] for c in sorted(cells)],
                       "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "cells": {}}
        (ANSWER_DIR/"logs").mkdir(parents=True, exist_ok=True)

    def save(self):
        if self.dry_run: return
        path, tmp = ANSWER_DIR/"answer.json", ANSWER_DIR/f".answer.json.{os.getpid()}.tmp"
        old = json.loads(path.read_text())["processes"] if path.exists() else []
        mine = {**self.record, "id": f"{self.record['started']} pid {os.getpid()}"}
        processes = [p for p in old if p["id"] != mine["id"]] + [mine]
        tmp.write_text(json.dumps({"processes": processes}, indent=1) + "\n")
        tmp.replace(path)

    def cell(self, name: str, params: dict) -> int:
        if complete(ANSWER_DIR/name) and (ANSWER_DIR/f"{name}.ipynb").exists(): return 0
        cmd = [sys.executable, "-m", "papermill", "nbs/05_train.ipynb", str(ANSWER_DIR/f"{name}.ipynb"),
               "-y", json.dumps({"preset": "pocket", **params}), "--no-progress-bar"]
        entry = {"command": " ".join(cmd[1:]), "start": time.time()}
        with self.lock: self.record["cells"][name] = entry
        if self.dry_run: print("would run:", entry["command"], flush=True); return 0
        with open(ANSWER_DIR/"logs"/f"{name}.log", "w") as log:
            env = {**os.environ, "OMP_NUM_THREADS": "1"}
            rc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, env=env).returncode
        entry.update(end=time.time(), seconds=round(time.time() - entry["start"], 1), returncode=rc)
        print(f"{name}: exit {rc} after {entry['seconds']} s", flush=True)
        with self.lock: self.save()
        return rc

    def finish(self, name: str, rc: int):
        "Record NAME's exit code and make the cells that need it ready (or failed, when it failed); under the lock."
        self.codes[name], self.running = rc, self.running - 1
        for c in [c for c in self.waiting if c[3] == name]:
            self.waiting.remove(c)
            if rc == 0: heapq.heappush(self.ready, c)
            else: self.codes[c[1]] = f"not run: {name} failed"
        self.lock.notify_all()

    def worker(self):
        while True:
            with self.lock:
                while not self.ready and self.running and self.waiting: self.lock.wait()
                if not self.ready: return
                _, name, params, _ = heapq.heappop(self.ready); self.running += 1
            rc = self.cell(name, params)
            with self.lock: self.finish(name, rc)

    def run(self) -> int:
        threads = [threading.Thread(target=self.worker) for _ in range(self.jobs)]
        for t in threads: t.start()
        for t in threads: t.join()
        self.record["finished"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()); self.save()
        failed = {n: rc for n, rc in self.codes.items() if rc != 0}
        print(f"answer grid done: {len(self.codes) - len(failed)} ok, {len(failed)} failed {failed or ''}", flush=True)
        return len(failed)

def seed_range(text: str) -> list[int]:
    lo, _, hi = text.partition("-")
    return list(range(int(lo), int(hi or lo) + 1))

if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=max(1, (os.cpu_count() or 2) * 3 // 4), help="runs side by side")
    ap.add_argument("--seeds", type=seed_range, default=seed_range("100-119"), help="tranche 1's seeds, e.g. 100-119")
    ap.add_argument("--tranches", default="1,2", help="which tranches, e.g. 1 or 1,2")
    ap.add_argument("--dry-run", action="store_true", help="print the papermill commands without running them")
    a = ap.parse_args()
    cells = [c for t in map(int, a.tranches.split(",")) for c in tranche_cells(t, a.seeds)]
    sys.exit(1 if Answer(cells, a.jobs, a.dry_run).run() else 0)
