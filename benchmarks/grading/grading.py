"""Grading cost on this machine, the old sandbox and the bubblewrap one side by side on the same jobs.

Workloads: the 119 canonical LeetCode solutions, a hostile mix, and pocket rollouts logged by a training run, replayed
(their logged labels must come out again). "old" is the sandbox the project used before bubblewrap, which the working
tree keeps as its announced fallback (`sandbox._run_legacy`, `GQ_SANDBOX=legacy`); "new" is the bubblewrap engine, a
fresh bubblewrap per program (`sandbox._run_bwrap`, `GQ_SANDBOX=cold`; `warm.py` beside it times the warm workers); the
grader around them is the working tree's in both arms. Serial grading runs in this process, the two swapped under
`rewards.grade`, alternating job by job (old-new, new-old, ...). In parallel, two ways, each alternating whole batches
(ABBA...): a thread pool of `grade` in this process, and `grade_many` (worker processes), run in a child process per
batch on a snapshot of the package after a warm-up batch, with `GQ_SANDBOX=legacy` in the old arm.

Run: GQ_DATA_DIR=../shared/data/leetcode python benchmarks/grading/grading.py [--out DIR]
(writes grading.md and grading.json beside it, or to DIR; --smoke: two jobs of each workload, two hostile programs at a
0.5 s limit, one round, two of each start-up timing, to a temporary folder)
"""
import argparse, atexit, contextlib, functools, gzip, json, os, pickle, platform, resource, shutil, statistics
import subprocess, sys, tempfile, time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace
from gradient_quarantine import rewards, sandbox
from gradient_quarantine.problems import load_leetcode, assign_modes
from gradient_quarantine.pocket_problems import pocket_problems
from gradient_quarantine.results import GRID_DIR
from gradient_quarantine.rewards import MODES, fenced, grade, wrong_solution
from gradient_quarantine.train import load_substrate, resolve_config
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from provenance import footer, provenance, results_dir

REPO = Path(__file__).resolve().parents[2]
HOSTILE = {  # programs appended to a wrong solution; each must end in a bounded time with no gt_correct
    "cpu spin": "while True: pass",
    "sleep forever": "import time\ntime.sleep(10 ** 6)",
    "fork bomb": "import os\nwhile True:\n    try: os.fork()\n    except OSError: pass",
    "memory bomb": "blocks = []\nwhile True: blocks.append(bytearray(1 << 26))",
    "1 GB of output": "import sys\nfor _ in range(1024): sys.stdout.write('x' * (1 << 20))",
    "exit 0 early": "import os\nos._exit(0)",
    "forge the report": "import os\nos.write(3, b'{\"k\": \"out\", \"i\": 0, \"v\": [\"i\", 0]}\\n')",
    "fd exhaustion": "import os\nfds = []\nwhile True:\n    try: fds.append(os.open('/dev/null', os.O_RDONLY))\n"
                     "    except OSError: break",
}
SMOKE_HOSTILE = ("cpu spin", "forge the report")   # a smoke's hostile mix: one time limit, one forged report
LOGGED_LABELS = ("reward", "gt_correct", "exploited", "channel", "passed", "can_compile", "tests_passed",
                 "own_tests_pass", "timed_out")
BATCH = """
import pickle, sys, time
import gradient_quarantine
from gradient_quarantine import sandbox
from gradient_quarantine.rewards import grade_many
assert gradient_quarantine.__file__.startswith(sys.argv[3]), \\
f"imported {gradient_quarantine.__file__}, not the snapshot {sys.argv[3]}"
path = sandbox.sandbox_path()
assert path == "legacy" or sandbox.engine_problem() is None, \\
f"{path} would measure the fallback: {sandbox.engine_problem()}"
assert path != "warm" or sandbox.warm_problem() is None, f"no warm workers: {sandbox.warm_problem()}"
jobs, timeout_s, workers = pickle.load(open(sys.argv[1], "rb"))
grade_many(jobs[:workers], timeout_s=timeout_s, workers=workers)
t0 = time.monotonic(); grades = grade_many(jobs, timeout_s=timeout_s, workers=workers); seconds = time.monotonic() - t0
pickle.dump((seconds, grades), open(sys.argv[2], "wb"))
"""

def snapshot() -> Path:
    "A copy of the working tree's package, for the child processes of the grade_many arm."
    root = Path(tempfile.mkdtemp(prefix="gq_grading_bench_"))
    atexit.register(shutil.rmtree, root, True)
    shutil.copytree(REPO/"gradient_quarantine", root/"gradient_quarantine",
                    ignore=shutil.ignore_patterns("__pycache__"))
    return root

BOXES = {"old": SimpleNamespace(run_python=lambda source, *, timeout_s=3.0, memory_mb=1024:
                                sandbox._run_legacy(source, timeout_s, memory_mb)),
         "new": SimpleNamespace(run_python=lambda source, *, timeout_s=3.0, memory_mb=1024:
                                sandbox._run_bwrap(source, timeout_s, memory_mb))}
# new: a fresh bubblewrap per program (warm.py times warm workers)
ENVS = {"old": {"GQ_SANDBOX": "legacy"}, "new": {"GQ_SANDBOX": "cold"}}

@contextlib.contextmanager
def graded_by(box):
    "Make `rewards` run every program through this sandbox module."
    real = rewards.run_python
    rewards.run_python = box.run_python
    try: yield
    finally: rewards.run_python = real

def cpu_seconds() -> float:
    "CPU time of this process and of its reaped children (the sandboxed programs) so far."
    return sum(r.ru_utime + r.ru_stime for r in (resource.getrusage(resource.RUSAGE_SELF),
                                                 resource.getrusage(resource.RUSAGE_CHILDREN)))

def serial(jobs, boxes, timeout_s: float) -> dict:
    """Grade each job once per sandbox, alternating which goes first; per job the wall seconds, the grader's own CPU
    seconds (this thread: what holds the GIL), the CPU seconds of grader and programs together, and the grades."""
    out = {arm: {"grades": [], "wall": [], "cpu": [], "cpu_all": []} for arm in boxes}
    for i, job in enumerate(jobs):
        for arm in (list(boxes) if i % 2 == 0 else list(boxes)[::-1]):
            with graded_by(boxes[arm]):
                t0, c0, a0 = time.monotonic(), time.thread_time(), cpu_seconds()
                g = grade(*job, timeout_s=timeout_s)
                out[arm]["wall"].append(time.monotonic() - t0); out[arm]["cpu"].append(time.thread_time() - c0)
                out[arm]["cpu_all"].append(cpu_seconds() - a0)
            out[arm]["grades"].append(g)
    return out

def batch(root: Path, jobs, timeout_s: float, env: dict, workers: int | None = None) -> tuple[float, list]:
    ("Seconds of one `grade_many` on WORKERS processes (default: every core) over all jobs in a child process "
     "importing the package from `root` (after a warm-up batch), and its grades; the child asserts that ENV's "
     "sandbox runs.")
    workers = workers or os.cpu_count()
    # also its working directory: `python -c` puts that first on sys.path, before PYTHONPATH
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp)/"jobs").write_bytes(pickle.dumps((jobs, timeout_s, workers)))
        subprocess.run([sys.executable, "-c", BATCH, f"{tmp}/jobs", f"{tmp}/out", str(root)], check=True, cwd=tmp,
                       env={**os.environ, "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")]),
                            "GQ_GRADE_WORKERS": str(workers), **env})
        return pickle.loads((Path(tmp)/"out").read_bytes())

def pooled(box, jobs, timeout_s: float) -> tuple[float, list]:
    ("Seconds of a thread pool of `grade` over all jobs in this process, one thread per core "
     "(`grade_many` as it was at HEAD), and its grades.")
    with graded_by(box), ThreadPoolExecutor(os.cpu_count()) as pool:
        t0 = time.monotonic(); grades = list(pool.map(lambda job: grade(*job, timeout_s=timeout_s), jobs))
        return time.monotonic() - t0, grades

def alternated(runs: dict, rounds: int) -> dict:
    "Each arm's run `rounds` times in ABBA order: {arm: {'seconds': [...], 'grades': the last run's}}."
    out = {arm: {"seconds": []} for arm in runs}
    for r in range(rounds):
        for arm in (list(runs) if r % 2 == 0 else list(runs)[::-1]):
            seconds, out[arm]["grades"] = runs[arm]()
            out[arm]["seconds"].append(seconds)
    return out

@functools.cache
def pocket_problems_by_id() -> dict:
    "Every pocket problem, train and test, by id (built once: it takes seconds)."
    train, test = load_substrate(resolve_config("pocket"))
    return {p.id: p for p in list(train) + list(test)}

def pocket_jobs(path: Path, updates: int | None):
    "The logged rollouts of the first `updates` updates (all where None), as grade jobs with their problems."
    problems = pocket_problems_by_id()
    rows = [json.loads(line) for line in gzip.open(path, "rt")]
    rows = [r for r in rows if updates is None or r["update"] <= updates]
    return [(r["completion"], problems[r["problem"]], r["mode"]) for r in rows], rows

def differences(jobs, these, those) -> list:
    "(problem id, one grade, the other) wherever two gradings of the same jobs disagree."
    return [(j[1].id, a, b) for j, a, b in zip(jobs, these, those) if a != b]

def check_logged(grades, rows, what: str):
    "The replayed grades must carry the labels the training run logged."
    diffs = [(r["update"], r["problem"], k, r[k], getattr(g, k)) for g, r in zip(grades, rows) for k in LOGGED_LABELS
             if r[k] != getattr(g, k)]
    assert not diffs, f"{what}: {len(diffs)} replayed labels differ from the logged ones, e.g. {diffs[:5]}"

def proc_scan_ms(box, n: int = 200) -> float:
    t0 = time.perf_counter()
    for _ in range(n): box._proc_uids()
    return (time.perf_counter() - t0) / n * 1e3

def startup_ms(flags: list[str], n: int = 20) -> float:
    times = []
    for _ in range(n):
        t0 = time.perf_counter(); subprocess.run([sys.executable, *flags, "-c", "pass"], check=True)
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3

def run_start_ms(n: int) -> dict:
    "Median wall ms of one sandbox run of `pass`, old and new alternated (what a run costs beyond the program itself)."
    times = {"old": [], "new": []}
    for i in range(n):
        for arm in (("old", "new") if i % 2 == 0 else ("new", "old")):
            t0 = time.perf_counter(); BOXES[arm].run_python("pass"); times[arm].append((time.perf_counter() - t0) * 1e3)
    return {arm: round(statistics.median(t), 1) for arm, t in times.items()}

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3,
                    help="parallel batches per sandbox, workload and way of running them")
    ap.add_argument("--pocket-updates", type=int, default=5,
                    help="updates of logged rollouts (64 each) in the timed pocket workload")
    ap.add_argument("--timeout", type=float, default=3.0,
                    help="wall limit per program for the canonical and pocket workloads (the graders' default 3 s; "
                         "more on a loaded machine, where the slowest canonical solutions would otherwise time out); "
                         "the hostile mix always runs at 3 s")
    ap.add_argument("--rollouts", default=str(REPO/GRID_DIR/"route2b_s43"/"rollouts.jsonl.gz"))
    ap.add_argument("--out", default=None, help="folder for grading.md and grading.json (default: beside this script)")
    ap.add_argument("--smoke", action="store_true",
                    help="two jobs per workload, two hostile programs at a 0.5 s limit, one round: checks the script")
    args = ap.parse_args()
    out, record = results_dir(args.out, args.smoke, __file__), provenance()
    assert sandbox.engine_problem() is None, f"bubblewrap cannot run here: {sandbox.engine_problem()}"
    n, hostile_s = (2, 0.5) if args.smoke else (None, 3.0)
    if args.smoke: args.rounds, args.pocket_updates = 1, 1
    root, boxes = snapshot(), BOXES
    test = load_leetcode("test")
    modes = assign_modes(test, MODES, seed=0)
    canon = [(fenced(p.canonical_solution), p, modes[p.id]) for p in test][:n]
    codes = [HOSTILE[k] for k in SMOKE_HOSTILE] if args.smoke else list(HOSTILE.values()) * 2
    hostile = [(fenced(wrong_solution(p) + "\n" + code), p, modes[p.id]) for p, code in zip(test, codes)]
    pocket, pocket_rows = pocket_jobs(Path(args.rollouts), args.pocket_updates)
    pocket, pocket_rows = pocket[:n], pocket_rows[:n]
    host = {"cpus": os.cpu_count(), "processes": len(sandbox._proc_uids()), "loadavg_start": os.getloadavg(),
            "python": platform.python_version(), "kernel": platform.release(), "workers": os.cpu_count(),
            "timeout_s": args.timeout, "rounds": args.rounds, "limits_new": sandbox.run_python("pass").limits,
            "grade_many": "worker processes" if hasattr(rewards, "GradingWorker") else "threads"}
    host["proc_scan_ms"] = round(proc_scan_ms(sandbox, 2 if args.smoke else 200), 2)
    host["run_start_ms"] = run_start_ms(2 if args.smoke else 40)
    starts = 2 if args.smoke else 20
    host["interpreter_start_ms"] = {"-I": round(startup_ms(["-I"], starts), 1),
                                    "-I -S": round(startup_ms(["-I", "-S"], starts), 1)}
    rows, slowest = [], []
    workloads = ((f"{len(canon)} canonical solutions", canon, args.timeout),
                 (f"hostile mix ({len(hostile)} programs)", hostile, hostile_s),
                 (f"pocket rollouts, updates 1-{args.pocket_updates} ({len(pocket)})", pocket, args.timeout))
    for name, jobs, timeout_s in workloads:
        t_start = time.monotonic()
        s = serial(jobs, boxes, timeout_s)
        threads = alternated({arm: (lambda box=box: pooled(box, jobs, timeout_s)) for arm, box in boxes.items()},
                             args.rounds)
        many = alternated({arm: (lambda env=env: batch(root, jobs, timeout_s, env)) for arm, env in ENVS.items()},
                          args.rounds)
        for arm in boxes:
            for way, parallel in (("the thread pool", threads), ("grade_many", many)):
                diff = differences(jobs, s[arm]["grades"], parallel[arm]["grades"])
                assert not diff, f"{name}, {arm}: {way} disagrees with serial grading: {diff}"
        diff = differences(jobs, s["old"]["grades"], s["new"]["grades"])
        assert not diff, f"{name}: the new sandbox changed a verdict: {diff}"
        grades = s["new"]["grades"]
        if name.endswith("canonical solutions"):
            assert all(g.gt_correct for g in grades), "a canonical solution failed"
            slowest = sorted(((j[1].id, round(t, 2)) for j, t in zip(jobs, s["new"]["wall"])), key=lambda x: -x[1])[:5]
        elif name.startswith("hostile"):
            assert not any(g.gt_correct for g in grades), "a hostile program was judged correct"
        else:
            for arm in boxes: check_logged(s[arm]["grades"], pocket_rows, f"{name}, {arm}")
        row = {"workload": name, "n": len(jobs), "timeout_s": timeout_s}
        for arm in boxes:
            row[f"serial_ms_{arm}"] = round(statistics.mean(s[arm]["wall"]) * 1e3, 1)
            row[f"serial_median_ms_{arm}"] = round(statistics.median(s[arm]["wall"]) * 1e3, 1)
            row[f"cpu_ms_{arm}"] = round(statistics.mean(s[arm]["cpu_all"]) * 1e3, 1)
            row[f"grader_cpu_ms_{arm}"] = round(statistics.mean(s[arm]["cpu"]) * 1e3, 2)
            for way, parallel in (("threads", threads), ("grade_many", many)):
                row[f"{way}_s_{arm}"] = [round(t, 2) for t in parallel[arm]["seconds"]]
                row[f"{way}_per_s_{arm}"] = round(len(jobs) / statistics.median(parallel[arm]["seconds"]), 2)
        row["serial_ratio"] = round(row["serial_ms_old"] / row["serial_ms_new"], 2)
        for way in ("threads", "grade_many"):
            row[f"{way}_ratio"] = round(row[f"{way}_per_s_new"] / row[f"{way}_per_s_old"], 2)
        row["bench_s"] = round(time.monotonic() - t_start, 1)
        rows.append(row); print(row, flush=True)
    full, full_rows = pocket_jobs(Path(args.rollouts), None)
    full, full_rows = full[:n], full_rows[:n]
    full_s, full_grades = batch(root, full, args.timeout, ENVS["new"])
    check_logged(full_grades, full_rows, "all logged pocket rollouts, new sandbox")
    host["all_pocket_rollouts"] = {"n": len(full), "grade_many_s_new": round(full_s, 1),
                                   "grade_many_per_s_new": round(len(full) / full_s, 2), "labels_equal_logged": True}
    pocket_test = pocket_problems("test")[:n]
    canon_s, canon_grades = batch(root, [(fenced(p.canonical_solution), p, "gt_only") for p in pocket_test],
                                  args.timeout, ENVS["new"])
    assert all(g.gt_correct for g in canon_grades), [p.id for p, g in zip(pocket_test, canon_grades)
                                                     if not g.gt_correct]
    host["pocket_test_canonical"] = {"n": len(pocket_test), "grade_many_s_new": round(canon_s, 1),
                                     "all_gt_correct": True}
    host["loadavg_end"] = os.getloadavg()
    table = ["| workload | n | serial ms/program old | new | old/new | CPU ms/program old | new "
             "| grader CPU ms/program old | new | thread pool programs/s old | new | new/old "
             "| grade_many programs/s old | new | new/old |", "|" + "---|" * 15]
    table += [f"| {r['workload']} | {r['n']} | {r['serial_ms_old']} | {r['serial_ms_new']} | {r['serial_ratio']}x | "
              f"{r['cpu_ms_old']} | {r['cpu_ms_new']} | {r['grader_cpu_ms_old']} | {r['grader_cpu_ms_new']} | "
              f"{r['threads_per_s_old']} | {r['threads_per_s_new']} | {r['threads_ratio']}x | "
              f"{r['grade_many_per_s_old']} | {r['grade_many_per_s_new']} | {r['grade_many_ratio']}x |" for r in rows]
    text = ("\n".join(table) + "\n\n"
            f"Old: the sandbox before bubblewrap (the fallback, `GQ_SANDBOX=legacy`: a throwaway user and setrlimit, "
            f"no private filesystem view); new: bubblewrap, limits by {host['limits_new']}; the grader around them is "
            f"the working tree's in both arms.\n\n"
            f"- serial ms/program: mean wall time of one `grade` (one or two sandbox runs), the two sandboxes swapped "
            f"under `rewards.grade` in this process and alternated job by job;\n"
            f"- CPU ms/program: CPU time of the grader and the sandboxed programs together per program, serial, as the "
            f"kernel reports it to the grader; under bubblewrap the programs run in their own PID namespace and their "
            f"time does not reach the grader's children's account, so the new column is the grader and bubblewrap "
            f"alone: compare wall times. Grader CPU: the grading thread's own share, which holds the GIL and so "
            f"serialises grading threads on a many-core host;\n"
            f"- thread pool: {host['workers']} threads of `grade` in this process (which has imported torch, like a "
            f"trainer), the way `grade_many` graded at HEAD; grade_many: the working tree's `grade_many` "
            f"({host['grade_many']}), run in a child process on a snapshot of the package after a warm-up batch. Each "
            f"{args.rounds} batches per sandbox in ABBA order; programs/s from the median batch.\n\n"
            f"Host: {host['cpus']} CPUs, {host['processes']} processes, load average {host['loadavg_start'][0]:.2f} at "
            f"the start and {host['loadavg_end'][0]:.2f} at the end (other jobs ran meanwhile), Python "
            f"{host['python']}, kernel {host['kernel']}. Wall limit per program {args.timeout:g} s (hostile mix "
            f"{hostile_s:g} s). "
            f"One /proc scan (`_proc_uids`): {host['proc_scan_ms']} ms. Interpreter start-up: `-I` "
            f"{host['interpreter_start_ms']['-I']} ms, `-I -S` {host['interpreter_start_ms']['-I -S']} ms. One sandbox "
            f"run of `pass` (median of {2 if args.smoke else 40}, alternated): {host['run_start_ms']['old']} ms old, "
            f"{host['run_start_ms']['new']} ms new.\n\n"
            f"Verdicts: every job graded the same by both sandboxes, serially and in parallel; all {len(canon)} "
            f"canonical solutions gt_correct; no hostile program gt_correct; the replayed pocket rollouts carry their "
            f"logged labels ({', '.join(LOGGED_LABELS)}) under both. All {len(full)} logged rollouts of "
            f"{Path(args.rollouts).parent.name} replayed once through the new sandbox with `grade_many`: "
            f"{full_s:.1f} s ({len(full) / full_s:.1f}/s), every label equal to the logged one. All {len(pocket_test)} "
            f"canonical solutions of the pocket test set graded through the new sandbox: every one gt_correct "
            f"({canon_s:.1f} s).\n\n"
            f"Slowest canonical solutions (id, s, serial, new): {slowest}\n\n{footer(record)}\n")
    print(text)
    out.mkdir(parents=True, exist_ok=True)
    (out/"grading.md").write_text(f"# Grading cost: the old sandbox vs bubblewrap{' (smoke)' if args.smoke else ''}"
                                  f"\n\n" + text)
    (out/"grading.json").write_text(json.dumps({"provenance": record, "smoke": args.smoke, "rows": rows, **host,
                                                "slowest_canonical_serial": slowest}, indent=1) + "\n")

if __name__ == "__main__": main()
