"""Torch threads and grading workers for the pocket main job on this machine, quiet and under load, side by side.

Each configuration runs the pocket preset (route2b, seed 43, `--steps` updates, evaluation on `--eval-n` test
problems) in a fresh process with `torch.set_num_threads(T)` and W grading workers (`grade_many(workers=W)` for the
training and the evaluation grades; the trainer's default is one per core). The configurations run in turn (every other
round in reverse order), first on the quiet machine, then beside `--load` busy processes
(`python -c "while True: pass"`).

Other work on the machine would spoil the comparison, so a thread samples, every second, the CPU time of every process
outside the benchmark's own tree. An update (or an evaluation) counts only if those processes used less than
`--foreign-limit` CPU seconds per second of it; a configuration runs again until it has `--min-clean` clean updates
besides each run's first (which also computes the hack direction and starts the grading workers). The table has, per
configuration, the median over its clean updates of the seconds per update and of its split from metrics.jsonl:
generating, waiting for grades (grading runs beside generation and learning; this is only the wait) and learning
(backward and optimizer step); then the median clean evaluation. The JSON keeps every update with the foreign CPU
seconds beside it.

Run from the repository root: python benchmarks/threads/threads.py   (writes benchmarks/threads/threads.md and .json,
or to --out DIR). --smoke: one configuration (1 thread, 1 worker), no load, one run of a tiny two-update run
(smoke.SMOKE_RUN), no waiting for a quiet machine and every update counted clean, to a temporary folder.
"""
import argparse, atexit, bisect, functools, itertools, json, os, platform, shutil, statistics, subprocess, sys, tempfile
import threading, time
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from provenance import cpu_model, footer, provenance, results_dir
from smoke import SMOKE_RUN

def child(threads: int, workers: int, run: dict) -> dict:
    "One run (RUN: its config) at these settings: each update's and the evaluation's start, end and metrics row."
    import torch
    torch.set_num_threads(threads)
    from gradient_quarantine import evaluate, rewards, train
    for module in (train, evaluate): module.grade_many = functools.partial(rewards.grade_many, workers=workers)
    scratch = tempfile.mkdtemp(); atexit.register(shutil.rmtree, scratch, True)
    cfg = train.resolve_config(run_dir=scratch + "/run", **run)
    trainer = train.Trainer(cfg, progress=False)
    spans = {}
    def timed(name, fn):
        def run(*args):
            start = time.time(); out = fn(*args); spans[name(*args)] = (start, time.time()); return out
        return run
    trainer.update = timed(lambda u: u, trainer.update)
    trainer.evaluate = timed(lambda: "eval", trainer.evaluate)
    trainer.run()
    rows = {r["update"]: r for r in train.read_jsonl(Path(cfg.run_dir)/"metrics.jsonl")}
    keys = ("s_generate", "s_grade", "s_backward", "s_optimizer", "completion_tokens")
    return {"torch_threads_seen": torch.get_num_threads(), "eval": spans["eval"],
            "updates": [{"update": u, "span": spans[u], **{k: rows[u][k] for k in keys}} for u in sorted(rows)]}

class Foreign:
    "CPU seconds that processes outside this benchmark's process tree spend, sampled every second in a thread."
    def __init__(self):
        self.times, self.totals, self.last, self.seconds = [], [], {}, 0.0
        threading.Thread(target=self.loop, daemon=True).start()
    def sample(self) -> dict:
        stats, tick = {}, os.sysconf("SC_CLK_TCK")
        for d in os.listdir("/proc"):
            if not d.isdigit(): continue
            try: fields = Path(f"/proc/{d}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError: continue
            stats[int(d)] = (int(fields[1]), (int(fields[11]) + int(fields[12])) / tick)
        mine, me = set(), os.getpid()
        for pid in stats:
            chain, p = [], pid
            while p in stats and p not in mine and p != me and p > 1: chain.append(p); p = stats[p][0]
            if p == me or p in mine: mine.update(chain)
        return {pid: cpu for pid, (_, cpu) in stats.items() if pid not in mine and pid != me}
    def loop(self):
        self.last = self.sample()
        while True:
            time.sleep(1.0)
            now = self.sample()
            self.seconds += sum(max(0.0, cpu - self.last.get(pid, 0.0)) for pid, cpu in now.items())
            self.last = now; self.times.append(time.time()); self.totals.append(self.seconds)
    def at(self, t: float) -> float:
        i = bisect.bisect_right(self.times, t)
        return self.totals[i - 1] if i else 0.0
    def between(self, start: float, end: float) -> float:
        "Foreign CPU seconds from START to END, to the sampling second (the second after END included)."
        return self.at(end + 1.0) - self.at(start - 1.0)
    def quiet(self, seconds: float, limit: float = 0.3):
        "Block until the foreign processes used less than LIMIT CPU seconds over SECONDS (0: return at once)."
        while True:
            start = self.seconds; time.sleep(seconds)
            if self.seconds - start < limit: return

def clean(span, foreign: Foreign, limit: float) -> tuple[bool, float]:
    used = foreign.between(*span)
    return used <= limit * (span[1] - span[0]), used

def run_config(threads: int, workers: int, a, foreign: Foreign) -> list[dict]:
    "Fresh processes for one configuration until it has a.min_clean clean updates (first updates aside); every run."
    args = [sys.executable, __file__, "--child", str(threads), str(workers), "--run", json.dumps(a.run)]
    runs = []
    for attempt in range(a.max_runs):
        foreign.quiet(a.quiet_seconds)
        out = subprocess.run(args, capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": str(threads)})
        if out.returncode: raise RuntimeError(f"T={threads} W={workers} failed:\n{out.stderr[-3000:]}")
        time.sleep(2.5)                                   # the sampler's second after the end
        run = json.loads(out.stdout.strip().splitlines()[-1])
        for u in run["updates"]: u["clean"], u["foreign_cpu_s"] = clean(u["span"], foreign, a.foreign_limit)
        run["eval_clean"], run["eval_foreign_cpu_s"] = clean(run["eval"], foreign, a.foreign_limit)
        runs.append({"threads": threads, "workers": workers, "attempt": attempt, **run})
        n = sum(u["clean"] and u["update"] > 1 for r in runs for u in r["updates"])
        print(f"T={threads} W={workers} run {attempt}: {n} clean updates so far", flush=True)
        if n >= a.min_clean: break
    return runs

def measure(a, load: int, foreign: Foreign) -> list[dict]:
    "Every configuration beside LOAD busy processes, `a.rounds` times."
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(load)]
    try:
        configs, runs = list(itertools.product(a.threads, a.workers)), []
        for r in range(a.rounds):
            for threads, workers in (configs if r % 2 == 0 else configs[::-1]):
                runs += [{"load": load, "round": r, **run} for run in run_config(threads, workers, a, foreign)]
        return runs
    finally:
        for p in busy: p.kill(); p.wait()

def summary(runs: list[dict]) -> list[dict]:
    "Per (load, threads, workers): medians over the clean updates (first updates aside) and the clean evaluations."
    groups = {}
    for r in runs: groups.setdefault((r["load"], r["threads"], r["workers"]), []).append(r)
    rows = []
    for (load, threads, workers), rs in sorted(groups.items()):
        ups = [u for r in rs for u in r["updates"] if u["clean"] and u["update"] > 1]
        med = lambda f: statistics.median(map(f, ups)) if ups else float("nan")
        evals = [r["eval"][1] - r["eval"][0] for r in rs if r["eval_clean"]]
        rows.append({"load": load, "threads": threads, "workers": workers, "clean_updates": len(ups),
                     "s_update": med(lambda u: u["span"][1] - u["span"][0]),
                     "s_generate": med(lambda u: u["s_generate"]), "s_grade_wait": med(lambda u: u["s_grade"]),
                     "s_learn": med(lambda u: u["s_backward"] + u["s_optimizer"]),
                     "s_eval": statistics.median(evals) if evals else float("nan"), "runs": len(rs)})
    return rows

def table(rows: list[dict]) -> list[str]:
    "Markdown: a row per configuration, with s/update relative to the default (2 threads, 2 workers) at the same load."
    base = {r["load"]: r["s_update"] for r in rows if (r["threads"], r["workers"]) == (2, 2)}
    lines = ["| busy processes | torch threads | grading workers | s/update | generate | grade wait | learn | eval s "
             "| clean updates (runs) | s/update vs 2 threads, 2 workers |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        ratio = f"{r['s_update'] / base[r['load']]:.2f}" if r["load"] in base else "-"
        cells = " | ".join(f"{r[k]:.2f}" for k in ("s_update", "s_generate", "s_grade_wait", "s_learn", "s_eval"))
        lines.append(f"| {r['load']} | {r['threads']} | {r['workers']} | {cells} | {r['clean_updates']} ({r['runs']}) "
                     f"| {ratio} |")
    return lines

def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--child", nargs=2, type=int, metavar=("THREADS", "WORKERS"), help=argparse.SUPPRESS)
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--eval-n", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--min-clean", type=int, default=5,
                    help="clean updates per configuration and round, first updates aside")
    ap.add_argument("--max-runs", type=int, default=6, help="runs per configuration and round, at most")
    ap.add_argument("--foreign-limit", type=float, default=0.05,
                    help="an update is clean if other processes used at most this many CPU seconds per second of it")
    ap.add_argument("--load", type=int, nargs="+", default=[0, 2], help="busy processes beside the runs, per condition")
    ap.add_argument("--out", default=None, help="folder for the results (default: beside this script)")
    ap.add_argument("--smoke", action="store_true", help="one configuration, one tiny run: checks the script")
    ap.add_argument("--run", type=json.loads, default=None, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        print(json.dumps(child(*a.child, a.run))); return
    out, record = results_dir(a.out, a.smoke, __file__), provenance()
    a.quiet_seconds = 0.0 if a.smoke else 10.0
    a.run = {"preset": "pocket", "seed": 43, "steps": a.steps, "eval_n": a.eval_n}
    if a.smoke:
        a.run = {**SMOKE_RUN, "seed": 43, "steps": 2}                 # update 2: the first that is not a run's first
        a.steps, a.eval_n, a.threads, a.workers, a.load = a.run["steps"], a.run["eval_n"], [1], [1], [0]
        a.min_clean, a.max_runs = 1, 1
        a.foreign_limit = float(os.cpu_count())                         # all the cores: every update counts clean
    t0, foreign = time.time(), Foreign()
    runs = [r for load in a.load for r in measure(a, load, foreign)]
    rows = summary(runs)
    meta = {"cpus": os.cpu_count(), "processor": cpu_model(), "run": a.run, "python": platform.python_version(),
            "steps": a.steps, "eval_n": a.eval_n, "rounds": a.rounds, "loads": a.load,
            "foreign_limit": a.foreign_limit,
            "minutes": round((time.time() - t0) / 60, 1), "date": time.strftime("%Y-%m-%d")}
    lines = [f"# Torch threads and grading workers ({a.run['preset']} main job, CPU)",
             "", f"{meta['cpus']} CPUs ({meta['processor']}), Python {meta['python']}, {meta['date']}. "
             f"{a.run['preset']} preset, route2b, seed 43, {a.steps} updates and evaluation on {a.eval_n} test "
             "problems per run, each run in a fresh process; medians over the clean updates (each run's first aside) "
             f"and the clean evaluations (other processes used at most {a.foreign_limit} CPU s per second beside "
             "them). Loaded: beside busy processes "
             f"(`python -c \"while True: pass\"`). `python benchmarks/threads/threads.py` took "
             f"{meta['minutes']} minutes.", "",
             *table(rows), "", footer(record), ""]
    out.mkdir(parents=True, exist_ok=True)
    (out/"threads.md").write_text("\n".join(lines))
    (out/"threads.json").write_text(json.dumps({"provenance": record, "smoke": a.smoke, "meta": meta, "summary": rows,
                                                "runs": runs}, indent=1) + "\n")
    print("\n".join(lines))

if __name__ == "__main__": main()
