"""Warm sandbox, two forks per program against three, side by side on the same jobs and host.

old: the package at --old-ref (a commit before the change), whose zygote forks a child per program that
forks the PID namespace's init, which forks the program (three forks); new: the working tree's, whose zygote forks
the init itself (two forks). Both are warm workers (`GQ_SANDBOX` unset). Each measurement runs in a child process
importing one copy of the package, the paths alternated round by round (A B, B A, ...), and reports the host's CPU
time (busy jiffies of /proc/stat, so the kernel's work for namespaces and forks counts) beside the wall time:

- `pass`: N runs of `pass` through one warm worker;
- serial: `grade` of each logged pocket rollout of the first --updates updates, one after the other;
- grade_many: the same jobs on --workers grading processes, after a warm-up batch.

Then every logged rollout of the run is replayed through the new path with `grade_many` (its labels must equal the
logged ones), and the hostile mix of `grading.py` is graded by both paths (the verdicts must agree).

Run: GQ_DATA_DIR=../shared/data/leetcode python benchmarks/grading/warm_two_forks.py --old-ref REF [--name NAME]
(writes NAME.md and NAME.json beside it or to --out DIR; NAME defaults to warm_two_forks; --smoke: the package at
HEAD as old unless --old-ref says otherwise, one round, 5 passes, two jobs, two hostile programs at a 0.5 s limit, a
replay of two rollouts, to a temporary folder)
"""
import argparse, atexit, json, os, pickle, platform, shutil, statistics, subprocess, sys, tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE.parent))
from provenance import footer, provenance, results_dir
CHILD = """
import json, os, pickle, sys, time
from pathlib import Path
root, task, arg = sys.argv[1], sys.argv[2], pickle.load(open(sys.argv[3], "rb"))
import gradient_quarantine
assert gradient_quarantine.__file__.startswith(root), (gradient_quarantine.__file__, root)
from gradient_quarantine import sandbox
from gradient_quarantine.rewards import grade, grade_many
assert sandbox.engine_problem() is None and sandbox.warm_problem() is None, "no warm workers here"
TICK = os.sysconf("SC_CLK_TCK")
def busy():
    v = [int(x) for x in Path("/proc/stat").read_text().split()[1:11]]
    return (sum(v) - v[3] - v[4]) / TICK
def timed(f):
    b0, t0 = busy(), time.monotonic(); out = f(); return time.monotonic() - t0, busy() - b0, out
if task == "pass":
    worker = sandbox.WarmWorker(); worker.run("pass")
    wall, cpu, _ = timed(lambda: [worker.run("pass") for _ in range(arg)]); worker.close(); grades = None
elif task == "serial":
    grade(*arg[0], timeout_s=30.0)
    wall, cpu, grades = timed(lambda: [grade(*job, timeout_s=30.0) for job in arg])
else:
    jobs, workers, timeout_s = arg
    grade_many(jobs[:workers], workers=workers, timeout_s=timeout_s)
    wall, cpu, grades = timed(lambda: grade_many(jobs, workers=workers, timeout_s=timeout_s))
pickle.dump((wall, cpu, grades), open(sys.argv[4], "wb"))
"""


def old_copy(ref: str) -> Path:
    "The package at git ref `ref`, in a temporary folder."
    root = Path(tempfile.mkdtemp(prefix="gq_two_forks_old_")); atexit.register(shutil.rmtree, root, True)
    archive = subprocess.run(["git", "archive", ref, "gradient_quarantine"], cwd=REPO, check=True, capture_output=True)
    subprocess.run(["tar", "-x", "-C", str(root)], input=archive.stdout, check=True)
    return root

def measure(root: Path, task: str, arg) -> tuple[float, float, list | None]:
    "(wall s, host CPU s, grades) of one task in a child process importing the package from `root`."
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp)/"arg").write_bytes(pickle.dumps(arg))
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")])}
        env.pop("GQ_SANDBOX", None)
        subprocess.run([sys.executable, "-c", CHILD, str(root), task, f"{tmp}/arg", f"{tmp}/out"], check=True, cwd=tmp,
                       env=env)
        return pickle.loads((Path(tmp)/"out").read_bytes())

def per_program(runs: list, n: int) -> dict:
    "Median wall and host CPU milliseconds per program over the rounds, and each round's."
    return {"wall_ms": round(statistics.median(w for w, _ in runs) / n * 1e3, 2),
            "cpu_ms": round(statistics.median(c for _, c in runs) / n * 1e3, 2),
            "rounds_wall_ms": [round(w / n * 1e3, 2) for w, _ in runs],
            "rounds_cpu_ms": [round(c / n * 1e3, 2) for _, c in runs]}

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--old-ref", default=None, help="git ref of the package with three forks per program "
                    "(required, except in a smoke: HEAD)")
    ap.add_argument("--rounds", type=int, default=4, help="measurements per path and task, alternated (ABBA...)")
    ap.add_argument("--passes", type=int, default=400, help="runs of `pass` per measurement")
    ap.add_argument("--updates", type=int, default=6, help="updates of logged rollouts (64 each) in the timed jobs")
    ap.add_argument("--workers", type=int, default=os.cpu_count(), help="grading processes of grade_many")
    ap.add_argument("--name", default="warm_two_forks")
    ap.add_argument("--rollouts", default=None, help="the logged rollouts (default: the committed grid's route2b_s43)")
    ap.add_argument("--out", default=None, help="folder for the results (default: beside this script)")
    ap.add_argument("--smoke", action="store_true", help="one round of a few jobs, old = HEAD unless --old-ref, "
                    "to a temporary folder: checks the script")
    args = ap.parse_args()
    if args.old_ref is None and not args.smoke: ap.error("--old-ref is required (except with --smoke)")
    args.out, args.provenance = results_dir(args.out, args.smoke, __file__), provenance()
    n, hostile_s = (2, 0.5) if args.smoke else (None, 3.0)
    if args.smoke: args.old_ref, args.rounds, args.passes, args.updates = args.old_ref or "HEAD", 1, 5, 1
    sys.path.insert(0, str(HERE))
    from grading import HOSTILE, SMOKE_HOSTILE, check_logged, pocket_jobs
    from warm import verdicts
    from gradient_quarantine.problems import load_leetcode, assign_modes
    from gradient_quarantine.results import GRID_DIR
    from gradient_quarantine.rewards import MODES, fenced, wrong_solution
    rollouts = Path(args.rollouts or REPO/GRID_DIR/"route2b_s43"/"rollouts.jsonl.gz")
    roots = {"old": old_copy(args.old_ref), "new": REPO}
    jobs, rows = pocket_jobs(rollouts, args.updates)
    jobs, rows = jobs[:n], rows[:n]
    tasks = {"pass": (args.passes, args.passes), "serial": (jobs, len(jobs)),
             "grade_many": ((jobs, args.workers, 30.0), len(jobs))}
    results = {task: {path: [] for path in roots} for task in tasks}
    for r in range(args.rounds):
        for path in (list(roots) if r % 2 == 0 else list(roots)[::-1]):
            for task, (arg, _) in tasks.items():
                wall, cpu, grades = measure(roots[path], task, arg)
                results[task][path].append((wall, cpu))
                if grades is not None: check_logged(grades, rows, f"{task}, {path}, round {r}")
                print(path, task, round(wall, 2), round(cpu, 2), flush=True)
    table = {task: {path: per_program(results[task][path], tasks[task][1]) for path in roots} for task in tasks}
    test = load_leetcode("test")
    modes = assign_modes(test, MODES, seed=0)
    names = list(SMOKE_HOSTILE) if args.smoke else list(HOSTILE) * 2
    hostile = [(fenced(wrong_solution(p) + "\n" + HOSTILE[k]), p, modes[p.id]) for p, k in zip(test, names)]
    hostile_grades = {path: measure(root, "grade_many", (hostile, args.workers, hostile_s))[2]
                      for path, root in roots.items()}
    disagree = [n for n, a, b in zip(names, hostile_grades["old"], hostile_grades["new"])
                if verdicts(a, n) != verdicts(b, n)]
    assert not disagree, f"the hostile mix is graded differently: {disagree}"
    assert not any(g.gt_correct for g in hostile_grades["new"]), "a hostile program was judged correct"
    full, full_rows = pocket_jobs(rollouts, None)
    full, full_rows = full[:n], full_rows[:n]
    replay_s, _, replay = measure(REPO, "grade_many", (full, args.workers, 30.0))
    check_logged(replay, full_rows, "the replay of every logged rollout, new")
    host = {"cpus": os.cpu_count(), "workers": args.workers, "python": platform.python_version(),
            "kernel": platform.release(), "old_ref": args.old_ref, "rounds": args.rounds, "pocket_jobs": len(jobs),
            "hostile": {"programs": len(hostile), "timeout_s": hostile_s, "verdicts_agree": True},
            "replay": {"run": rollouts.parent.name, "n": len(full), "seconds": round(replay_s, 1),
                       "programs_per_s": round(len(full) / replay_s, 1), "labels_equal_logged": True}}
    write(table, host, args)

def write(table: dict, host: dict, args):
    what = {"pass": f"one run of `pass` ({args.passes} per measurement, one worker)",
            "serial": f"`grade` of a logged pocket rollout, one after the other ({host['pocket_jobs']} jobs)",
            "grade_many": f"`grade_many` of the same jobs on {args.workers} grading processes"}
    lines = ["| per program | wall ms, three forks | two forks | host CPU ms, three forks | two forks | CPU saved |",
             "|---|---|---|---|---|---|"]
    for task, t in table.items():
        saved = 1 - t["new"]["cpu_ms"] / t["old"]["cpu_ms"]
        lines.append(f"| {what[task]} | {t['old']['wall_ms']} | {t['new']['wall_ms']} | {t['old']['cpu_ms']} | "
                     f"{t['new']['cpu_ms']} | {saved:.0%} |")
    rp = host["replay"]
    md = [f"# Warm sandbox: two forks per program against three ({host['cpus']} cores"
          f"{', smoke' if args.smoke else ''})", "",
          "Written by `warm_two_forks.py` (its docstring says how). Medians over "
          f"{host['rounds']} measurements per path, the paths alternated; host CPU is the whole machine's busy time "
          "(the kernel's work for namespaces, forks and exits included) per program.", "", *lines, "",
          f"Verdicts: in every measurement, both paths' grades of the {host['pocket_jobs']} timed rollouts carry the "
          f"labels the training run logged; the hostile mix ({host['hostile']['programs']} programs) gets the same "
          f"verdicts from both; all {rp['n']} logged rollouts of {rp['run']} replayed through the new path with "
          f"`grade_many` carry their logged labels ({rp['seconds']} s, {rp['programs_per_s']} programs/s).", "",
          f"Host: {host['cpus']} CPUs, Python {host['python']}, kernel {host['kernel']}; old: `{host['old_ref']}`.",
          "", footer(args.provenance)]
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out/f"{args.name}.md").write_text("\n".join(md) + "\n")
    (args.out/f"{args.name}.json").write_text(json.dumps({"provenance": args.provenance, "smoke": args.smoke,
                                                          "host": host, "per_program": table}, indent=1) + "\n")
    print("\n".join(md))

if __name__ == "__main__": main()
