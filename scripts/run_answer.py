"""The second grid (runs/answer/, tranches 1-3) and its confirmation (runs/confirm/, tranche 4), pre-registered in
nbs/90b_answer.ipynb, on the pocket substrate; and the same design on the second organism (runs/pocket2/,
`--tranches pocket2`), pre-registered in nbs/90f_pocket2_answer.ipynb.

Tranche 1: vanilla, route2b per rollout, and the uniform split and random-V matched to route2b of the same seed, under
the conserving optimiser, seeds 100-119. Tranche 2: the cells of answer.TRANCHE2 (the uniform frontier, route2b's
bands, the per-knob optimiser's confound) for seeds 100-109. Tranche 3: answer.TRANCHE3, the held-out-mode splits with
their matched controls (seeds 100-109) and the 200-update horizon (seeds 100-104), whose knob checkpoints are scored on
the first grid's monitoring subset (nbs/07_eval_curve.ipynb) once the run is complete. Tranches 1-3 ran under the first
conserving optimiser, and their cells name it (optimizer=conserving). Tranche 4 (answer.TRANCHE4 on seeds 200-229, then
answer.TRANCHE4_EXTRA: the held-out-mode splits on 200-209 and the horizon on 200-204) runs under the default split-step
optimiser into runs/confirm/, by seed, all seven main cells of a seed before the next; it runs alone (--tranches 4).

Every cell is `papermill nbs/05_train.ipynb runs/answer/<cell>_s<seed>.ipynb`. Workers take the ready cell of lowest
(tranche, seed, position), tranche 3 by split first, then the horizon, so a grid cut short holds the lowest seeds of
every cell; a matched control becomes ready when the route2b run it matches is complete. A complete
cell is skipped, so rerunning resumes. Worker i runs on GPU i mod --gpus (CUDA_VISIBLE_DEVICES); on a GPU host the runs
share the GPUs through a CUDA MPS daemon (gradient_quarantine.launch.mps_daemon; --no-mps: without one).
runs/answer/answer.json records the host and every cell's command, GPU, times and exit code.

Usage, from the repository root (GPU host or CPU):
    python scripts/run_answer.py --jobs 12 [--gpus 2] [--no-mps] [--dry-run] [--seeds 100-119] [--tranches 1,2,3 | 4]
On a SLURM cluster (from a login node, with the repository on a shared filesystem), every cell a job of its own,
submitted by submitit in waves (a matched control after its route2b run; nbs/05g_launch.ipynb):
    python scripts/run_answer.py --slurm PARTITION [--cpus-per-job 8] [--timeout-min 240] [--tranches ...]
"""
import argparse, contextlib, heapq, json, os, platform, subprocess, sys, threading, time
from pathlib import Path
from gradient_quarantine.launch import GridJob, grid_executor, mps_daemon, papermill_command, submit_grid
from gradient_quarantine.answer import (CONFIRM_DIR, HELD_OUT_SPLITS, HORIZON_SEEDS, MATCHED_TO, TRANCHE2,
                                        TRANCHE2_SEEDS, TRANCHE3, TRANCHE3_SEEDS, TRANCHE4, TRANCHE4_EXTRA,
                                        TRANCHE4_HORIZON_SEEDS, TRANCHE4_MATCHED_TO, TRANCHE4_SEEDS,
                                        TRANCHE4_SPLIT_SEEDS)

ANSWER_DIR = Path("runs/answer")                      # tranche 4: runs/confirm (set in __main__)
FIRST_OPTIMIZER = {"optimizer": "conserving"}         # what tranches 1-3 ran under, named now that it is not the default
MONITORING = "runs/grid/monitoring_pocket_117.json"   # the first grid's frozen monitoring subset of the test set

def complete(run: Path) -> bool:
    status = run/"status.json"
    return status.exists() and json.loads(status.read_text()).get("complete", False)

NOTEBOOK_PARAMETERS = ("granularity", "steps", "modes", "pair_modes", "refresh_every", "reference_run")

def parameters(arm: str, seed: int, settings: dict) -> dict:
    "The papermill parameters of a cell: the notebook's own parameters as such, every other Config field in overrides."
    own = {k: v for k, v in settings.items() if k in NOTEBOOK_PARAMETERS}
    overrides = {k: v for k, v in settings.items() if k not in NOTEBOOK_PARAMETERS}
    return {"arm": arm, "seed": seed, **own, **({"overrides": overrides} if overrides else {})}

def tranche4_cells() -> list[tuple]:
    "Tranche 4: its seven cells by seed (matched controls after their route2b run), then the splits, then the horizon."
    out = []
    def add(rank, cell, settings, s):
        needs = f"{TRANCHE4_MATCHED_TO[cell]}_s{s}" if cell in TRANCHE4_MATCHED_TO else None
        extra = {k: v for k, v in settings.items() if k != "arm"}
        if needs: extra["reference_run"] = str(CONFIRM_DIR/needs)
        out.append((rank, f"{cell}_s{s}", parameters(settings["arm"], s, extra), needs))
    for s in TRANCHE4_SEEDS:
        for i, (cell, c) in enumerate(TRANCHE4.items()): add((4, 0, s, i), cell, c, s)
    for i, (cell, c) in enumerate(TRANCHE4_EXTRA.items()):
        horizon = cell.startswith("h200_")
        for s in TRANCHE4_HORIZON_SEEDS if horizon else TRANCHE4_SPLIT_SEEDS:
            add((4, 2 if horizon else 1, s, i), cell, c, s)
    return out

def tranche3_cells() -> list[tuple]:
    "Tranche 3's cells: the splits in order, each by seed, controls when their route2b run is complete; the horizon."
    out, splits = [], list(HELD_OUT_SPLITS)
    for i, (cell, c) in enumerate(TRANCHE3.items()):
        horizon = cell.startswith("h200_")
        for s in HORIZON_SEEDS if horizon else TRANCHE3_SEEDS:
            needs = f"{MATCHED_TO[cell]}_s{s}" if cell in MATCHED_TO else None
            settings = {**FIRST_OPTIMIZER, **{k: v for k, v in c.items() if k != "arm"}}
            if needs: settings["reference_run"] = str(ANSWER_DIR/needs)
            rank = (4, s, i) if horizon else (3, splits.index(cell.split("_")[-1]), s, i)
            out.append((rank, f"{cell}_s{s}", parameters(c["arm"], s, settings), needs))
    return out

def pocket2_cells() -> list[tuple]:
    """The pocket2 grid (nbs/90f_pocket2_answer.ipynb): its seven main cells by seed (matched controls after their
    route2b run), then the held-out-mode splits by seed; every cell on the pocket2 preset."""
    from gradient_quarantine.pocket2_answer import (POCKET2_CELLS, POCKET2_GRID, POCKET2_MATCHED_TO, POCKET2_SEEDS,
                                                    POCKET2_SPLIT_CELLS, POCKET2_SPLIT_SEEDS)
    out = []
    for part, (cells, seeds) in enumerate(((POCKET2_CELLS, POCKET2_SEEDS), (POCKET2_SPLIT_CELLS, POCKET2_SPLIT_SEEDS))):
        for s in seeds:
            for i, (cell, c) in enumerate(cells.items()):
                needs = f"{POCKET2_MATCHED_TO[cell]}_s{s}" if cell in POCKET2_MATCHED_TO else None
                extra = {k: v for k, v in c.items() if k != "arm"}
                if needs: extra["reference_run"] = str(POCKET2_GRID/needs)
                out.append(((5, part, s, i), f"{cell}_s{s}", {**parameters(c["arm"], s, extra), "preset": "pocket2"},
                            needs))
    return out

def tranche_cells(tranche: int, seeds: list[int]) -> list[tuple]:
    "(priority, name, papermill parameters, the name of the run it needs first or None) for one tranche."
    if tranche == 4: return tranche4_cells()
    if tranche == 3: return tranche3_cells()
    if tranche == 2:
        return [((2, s, i), f"{cell}_s{s}",
                 parameters(c["arm"], s, {**FIRST_OPTIMIZER, **{k: v for k, v in c.items() if k != "arm"}}), None)
                for s in TRANCHE2_SEEDS for i, (cell, c) in enumerate(TRANCHE2.items())]
    out = []
    for s in seeds:
        out += [((1, s, 0), f"route2b_s{s}", parameters("route2b", s, FIRST_OPTIMIZER), None),
                ((1, s, 1), f"vanilla_s{s}", parameters("vanilla", s, FIRST_OPTIMIZER), None)]
        out += [((1, s, i), f"{arm}_s{s}",
                 parameters(arm, s, {**FIRST_OPTIMIZER, "reference_run": str(ANSWER_DIR/f"route2b_s{s}")}),
                 f"route2b_s{s}") for i, arm in ((2, "uniform"), (3, "random_v"))]
    return out

def gpu_count() -> int:
    "GPUs that nvidia-smi lists (0 without it)."
    try: return len(subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True).stdout.splitlines())
    except FileNotFoundError: return 0

class Answer:
    def __init__(self, cells: list[tuple], jobs: int, gpus: int, dry_run: bool):
        self.jobs, self.gpus, self.dry_run, self.lock = jobs, gpus, dry_run, threading.Condition()
        self.ready = [c for c in cells if c[3] is None]
        self.waiting = [c for c in cells if c[3] is not None]
        self.running, self.codes = 0, {}
        heapq.heapify(self.ready)
        self.record = {"host": {"node": platform.node(), "cpus": os.cpu_count(), "gpus": gpus}, "jobs": jobs,
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

    def papermill(self, name: str, notebook: str, out: Path, params: dict, gpu: int | None) -> int:
        "Run NOTEBOOK into OUT with PARAMS on GPU (None: as the environment says); log to logs/NAME.log; exit code."
        cmd = [sys.executable, "-m", "papermill", notebook, str(out), "-y", json.dumps(params), "--no-progress-bar"]
        entry = {"command": " ".join(cmd[1:]), "gpu": gpu, "start": time.time()}
        with self.lock: self.record["cells"][name] = entry
        if self.dry_run: print("would run:", entry["command"], flush=True); return 0
        workers = max(2, 2 * (os.cpu_count() or 1) // self.jobs)   # graders per run: one per core each starved a host
        env = {**os.environ, "OMP_NUM_THREADS": "1", "GQ_GRADE_WORKERS": str(workers),
               **({} if gpu is None else {"CUDA_VISIBLE_DEVICES": str(gpu)})}
        with open(ANSWER_DIR/"logs"/f"{name}.log", "w") as log:
            rc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, env=env).returncode
        entry.update(end=time.time(), seconds=round(time.time() - entry["start"], 1), returncode=rc)
        print(f"{name}: exit {rc} after {entry['seconds']} s", flush=True)
        with self.lock: self.save()
        return rc

    def cell(self, name: str, params: dict, gpu: int | None) -> int:
        "Run what the cell still lacks (`cell_steps`) in order, stopping at the first that fails; its exit code."
        for log_name, notebook, out, step_params in cell_steps(name, params):
            if rc := self.papermill(log_name, notebook, out, step_params, gpu): return rc
        return 0

    def finish(self, name: str, rc: int):
        "Record NAME's exit code and make the cells that need it ready (or failed, when it failed); under the lock."
        self.codes[name], self.running = rc, self.running - 1
        for c in [c for c in self.waiting if c[3] == name]:
            self.waiting.remove(c)
            if rc == 0: heapq.heappush(self.ready, c)
            else: self.codes[c[1]] = f"not run: {name} failed"
        self.lock.notify_all()

    def worker(self, index: int):
        gpu = index % self.gpus if self.gpus else None
        while True:
            with self.lock:
                while not self.ready and self.running and self.waiting: self.lock.wait()
                if not self.ready: return
                _, name, params, _ = heapq.heappop(self.ready); self.running += 1
            rc = self.cell(name, params, gpu)
            with self.lock: self.finish(name, rc)

    def run(self) -> int:
        threads = [threading.Thread(target=self.worker, args=(i,)) for i in range(self.jobs)]
        for t in threads: t.start()
        for t in threads: t.join()
        self.record["finished"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()); self.save()
        failed = {n: rc for n, rc in self.codes.items() if rc != 0}
        print(f"answer grid done: {len(self.codes) - len(failed)} ok, {len(failed)} failed {failed or ''}", flush=True)
        return len(failed)

def cell_steps(name: str, params: dict) -> list[tuple[str, str, Path, dict]]:
    """What a cell still lacks, as (log name, notebook, output notebook, parameters): its training run unless it is
    complete and executed, then, for a horizon cell, the scoring of its checkpoints unless they are scored."""
    run = ANSWER_DIR/name
    notebook = ANSWER_DIR/f"{name}.ipynb"          # the run directory is passed: the kernel cannot see this name
    executed = notebook.exists() or notebook.with_suffix(".ipynb.gz").exists()          # .gz: committed
    steps = [] if complete(run) and executed else [
        (name, "nbs/05_train.ipynb", notebook, {"preset": "pocket", "run_dir": str(run), **params})]
    if name.startswith("h200_") and not (run/"eval_curve.jsonl").exists():
        steps.append((f"{name}.eval_curve", "nbs/07_eval_curve.ipynb", run/"eval_curve.ipynb",
                      {"run_dir": str(run), "ids_file": MONITORING}))
    return steps

def grid_jobs(cells: list[tuple]) -> list[GridJob]:
    "The cells that lack anything as scheduler jobs; a job needs another only while that one lacks something too."
    steps = {name: cell_steps(name, params) for _, name, params, _ in cells}
    return [GridJob(name, tuple(papermill_command(*step[1:]) for step in steps[name]),
                    needs if steps.get(needs) else None) for _, name, _, needs in sorted(cells) if steps[name]]

def seed_range(text: str) -> list[int]:
    lo, _, hi = text.partition("-")
    return list(range(int(lo), int(hi or lo) + 1))

if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=max(1, (os.cpu_count() or 2) * 3 // 4), help="runs side by side")
    ap.add_argument("--seeds", type=seed_range, default=seed_range("100-119"), help="tranche 1's seeds, e.g. 100-119")
    ap.add_argument("--tranches", default="1,2,3", help="which tranches, e.g. 1 or 1,2; or pocket2 (alone)")
    ap.add_argument("--gpus", type=int, default=gpu_count(), help="GPUs to spread the workers over (0: leave as is)")
    ap.add_argument("--no-mps", action="store_true", help="on a GPU host, run without a CUDA MPS daemon")
    ap.add_argument("--dry-run", action="store_true", help="print the papermill commands without running them")
    ap.add_argument("--slurm", metavar="PARTITION", help="submit every cell as a SLURM job on this partition instead")
    ap.add_argument("--cpus-per-job", type=int, default=8, help="with --slurm: cores per cell (its graders)")
    ap.add_argument("--timeout-min", type=int, default=240, help="with --slurm: a cell's time limit in minutes")
    a = ap.parse_args()
    if a.tranches == "pocket2":
        from gradient_quarantine.pocket2_answer import POCKET2_GRID
        ANSWER_DIR, cells = POCKET2_GRID, pocket2_cells()
    else:
        tranches = sorted(map(int, a.tranches.split(",")))
        if 4 in tranches and tranches != [4]: ap.error("tranche 4 runs alone: --tranches 4")
        if tranches == [4]: ANSWER_DIR = CONFIRM_DIR
        cells = [c for t in tranches for c in tranche_cells(t, a.seeds)]
    if a.slurm:
        jobs = grid_jobs(cells)
        if a.dry_run: sys.exit(print("\n".join(f"{j.name} (after {j.needs}): {j.commands}" for j in jobs)))
        executor = grid_executor("slurm", ANSWER_DIR/"slurm", partition=a.slurm, cpus_per_job=a.cpus_per_job,
                                 timeout_min=a.timeout_min)
        outcome = submit_grid(jobs, executor, Path.cwd(), ANSWER_DIR/"logs")
        sys.exit(1 if any(v != "ok" for v in outcome.values()) else 0)
    shared = a.gpus and not (a.no_mps or a.dry_run)
    with mps_daemon(ANSWER_DIR/"logs"/"mps") if shared else contextlib.nullcontext({}) as mps:
        os.environ.update(mps)                                  # every run joins the daemon (none without it)
        failed = Answer(cells, a.jobs, a.gpus, a.dry_run).run()
    sys.exit(1 if failed else 0)
