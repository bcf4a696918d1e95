"""The cost of the system-call filter: the warm sandbox with the filter (the working tree) against the same sandbox
without it (the package at `--baseline`, the last commit before the filter), side by side on the same jobs.

Workloads: the 119 canonical LeetCode test solutions and the pocket rollouts of the first updates of a training run.
Per workload:

- serial: each job graded once per arm by a grading process of that arm's package (`serve_grading`, started once per
  arm), the arms alternated job by job (A-B, B-A, ...); the wall ms of one round trip per program;
- grade_many: the arm's `grade_many` on every core, in a child process per batch on the arm's package after a warm-up
  batch, the arms alternated batch by batch (ABBA...); programs/s from the median batch.

Every job must get the same verdict from both arms. Then, through the filtered sandbox only: all 119 LeetCode and all
468 pocket canonical test solutions must be gt_correct, and every logged rollout of the run must regrade to its logged
labels.

Run: GQ_DATA_DIR=../shared/data/leetcode python benchmarks/grading/filter.py [--out DIR] [--smoke]
(writes filter.md and filter.json beside it, or to DIR; --smoke: two jobs of each workload and check, one round, in
seconds, to a temporary folder)
"""
import argparse, atexit, json, os, pickle, platform, shutil, statistics, subprocess, sys, tempfile, time
from pathlib import Path
sys.path.insert(0, str(Path(__file__).parent))
from grading import LOGGED_LABELS, REPO, alternated, batch, check_logged, pocket_jobs, snapshot
from gradient_quarantine import rewards, sandbox
from gradient_quarantine.pocket_problems import pocket_problems
from gradient_quarantine.problems import load_leetcode, assign_modes
from gradient_quarantine.results import GRID_DIR
from gradient_quarantine.rewards import MODES, fenced
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from provenance import footer, provenance, results_dir

BASELINE = "4a0d38a"  # the commit before the filter: the same grader and warm sandbox, no seccomp
ENV = {"GQ_SANDBOX": "warm"}

def package_at(rev: str) -> Path:
    "The package as it was at commit `rev`, in a directory of its own."
    root = Path(tempfile.mkdtemp(prefix="gq_filter_bench_"))
    atexit.register(shutil.rmtree, root, True)
    archive = subprocess.run(["git", "-C", str(REPO), "archive", rev, "gradient_quarantine"], capture_output=True,
                             check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(root)], input=archive, check=True)
    return root

class Grader:
    "One `serve_grading` process importing the package under `root`."
    def __init__(self, root: Path):
        self.proc = subprocess.Popen([sys.executable, "-c", rewards._SERVE], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, cwd=root,
                                     env={**os.environ, **ENV, "PYTHONPATH": str(root)})

    def grade(self, job: tuple, timeout_s: float):
        pickle.dump((job, timeout_s), self.proc.stdin); self.proc.stdin.flush()
        ok, reply = pickle.load(self.proc.stdout)
        if not ok: raise reply
        return reply

    def close(self): self.proc.stdin.close(); self.proc.wait()

def serial(jobs, roots: dict, timeout_s: float) -> dict:
    "Each job graded once per arm, alternating which goes first: wall seconds of each round trip and the grades."
    graders = {arm: Grader(root) for arm, root in roots.items()}
    for g in graders.values(): g.grade(jobs[0], timeout_s)  # warm-up: imports and the first warm worker
    out = {arm: {"wall": [], "grades": []} for arm in roots}
    for i, job in enumerate(jobs):
        for arm in (list(roots) if i % 2 == 0 else list(roots)[::-1]):
            t0 = time.monotonic(); g = graders[arm].grade(job, timeout_s)
            out[arm]["wall"].append(time.monotonic() - t0); out[arm]["grades"].append(g)
    for g in graders.values(): g.close()
    return out

def labels(g) -> tuple: return tuple(getattr(g, k) for k in LOGGED_LABELS)

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--smoke", action="store_true",
                    help="two jobs of each workload and check, one round, to a temporary folder: checks the script")
    ap.add_argument("--out", default=None, help="folder for filter.md and filter.json (default: beside this script)")
    ap.add_argument("--rounds", type=int, default=2, help="grade_many batches per arm and workload (ABBA order)")
    ap.add_argument("--pocket-updates", type=int, default=5, help="updates of logged rollouts in the timed workload")
    ap.add_argument("--timeout", type=float, default=30.0,
                    help="wall limit per program (the slowest canonical solutions take 2-3 s alone, more on a busy "
                         "host)")
    ap.add_argument("--baseline", default=BASELINE, help="the commit whose package is the unfiltered arm")
    ap.add_argument("--rollouts", default=str(REPO/GRID_DIR/"route2b_s43"/"rollouts.jsonl.gz"))
    args = ap.parse_args()
    out, record = results_dir(args.out, args.smoke, __file__), provenance()
    if args.smoke: args.rounds, args.pocket_updates = 1, 1
    assert sandbox.engine_problem() is None and sandbox.warm_problem() is None, "the warm sandbox cannot run here"
    roots = {"unfiltered": package_at(args.baseline), "filtered": snapshot()}
    n = 2 if args.smoke else None
    test = load_leetcode("test")
    modes = assign_modes(test, MODES, seed=0)
    canon = [(fenced(p.canonical_solution), p, modes[p.id]) for p in test][:n]
    pocket, pocket_rows = pocket_jobs(Path(args.rollouts), args.pocket_updates)
    pocket, pocket_rows = pocket[:n], pocket_rows[:n]
    host = {"cpus": os.cpu_count(), "loadavg_start": os.getloadavg(), "python": platform.python_version(),
            "kernel": platform.release(), "baseline": args.baseline, "timeout_s": args.timeout, "rounds": args.rounds}
    rows = []
    for name, jobs in ((f"{len(canon)} canonical LeetCode solutions", canon),
                       (f"pocket rollouts ({len(pocket)})", pocket)):
        s = serial(jobs, roots, args.timeout)
        many = alternated({arm: (lambda root=root: batch(root, jobs, args.timeout, ENV))
                           for arm, root in roots.items()}, args.rounds)
        for arm in roots:
            for way, grades in (("serial", s[arm]["grades"]), ("grade_many", many[arm]["grades"])):
                diff = [(j[1].id, labels(a), labels(b)) for j, a, b in zip(jobs, grades, s["unfiltered"]["grades"])
                        if labels(a) != labels(b)]
                assert not diff, f"{name}, {arm}, {way}: verdicts differ from the unfiltered serial ones: {diff[:5]}"
        row = {"workload": name, "n": len(jobs)}
        for arm in roots:
            row[f"serial_ms_{arm}"] = round(statistics.mean(s[arm]["wall"]) * 1e3, 1)
            row[f"grade_many_s_{arm}"] = [round(t, 2) for t in many[arm]["seconds"]]
            row[f"grade_many_per_s_{arm}"] = round(len(jobs) / statistics.median(many[arm]["seconds"]), 2)
        row["serial_slowdown"] = round(row["serial_ms_filtered"] / row["serial_ms_unfiltered"] - 1, 3)
        row["grade_many_slowdown"] = round(row["grade_many_per_s_unfiltered"] / row["grade_many_per_s_filtered"] - 1, 3)
        rows.append(row); print(row, flush=True)
    checks = {}
    canon_s, canon_grades = batch(roots["filtered"], canon, args.timeout, ENV)
    assert all(g.gt_correct for g in canon_grades), [j[1].id for j, g in zip(canon, canon_grades) if not g.gt_correct]
    checks["leetcode_canonical"] = {"n": len(canon), "all_gt_correct": True, "seconds": round(canon_s, 1)}
    pocket_test = pocket_problems("test")[:n]
    pc_s, pc_grades = batch(roots["filtered"], [(fenced(p.canonical_solution), p, "gt_only") for p in pocket_test],
                            args.timeout, ENV)
    assert all(g.gt_correct for g in pc_grades), [p.id for p, g in zip(pocket_test, pc_grades) if not g.gt_correct]
    checks["pocket_canonical"] = {"n": len(pocket_test), "all_gt_correct": True, "seconds": round(pc_s, 1)}
    full, full_rows = pocket_jobs(Path(args.rollouts), None)
    full, full_rows = full[:n], full_rows[:n]
    full_s, full_grades = batch(roots["filtered"], full, args.timeout, ENV)
    check_logged(full_grades, full_rows, "logged rollouts, filtered sandbox")
    checks["logged_rollouts"] = {"run": Path(args.rollouts).parent.name, "n": len(full), "labels_equal_logged": True,
                                 "seconds": round(full_s, 1)}
    host["loadavg_end"] = os.getloadavg()
    table = ["| workload | n | serial ms/program unfiltered | filtered | slower by | grade_many programs/s unfiltered "
             "| filtered | slower by |", "|" + "---|" * 8]
    table += [f"| {r['workload']} | {r['n']} | {r['serial_ms_unfiltered']} | {r['serial_ms_filtered']} | "
              f"{r['serial_slowdown']:+.1%} | {r['grade_many_per_s_unfiltered']} | {r['grade_many_per_s_filtered']} | "
              f"{r['grade_many_slowdown']:+.1%} |" for r in rows]
    text = ("\n".join(table) + "\n\n"
            f"Unfiltered: the package at {args.baseline} (the warm sandbox without the system-call filter); filtered: "
            f"the working tree's (the same sandbox, each program under the seccomp filter). Serial: one `grade` per "
            f"job through a grading process of each arm, alternated job by job; grade_many: {host['cpus']} grading "
            f"processes in a child process per batch after a warm-up batch, {args.rounds} batches per arm in ABBA "
            f"order, programs/s from the median batch. Wall limit per program {args.timeout:g} s. Every job got the "
            f"same verdict ({', '.join(LOGGED_LABELS)}) from both arms.\n\n"
            f"Under the filter: all {checks['leetcode_canonical']['n']} canonical LeetCode test solutions and all "
            f"{checks['pocket_canonical']['n']} canonical pocket test solutions gt_correct; all "
            f"{checks['logged_rollouts']['n']} logged rollouts of {checks['logged_rollouts']['run']} regraded with "
            f"`grade_many` to their logged labels ({full_s:.1f} s).\n\n"
            f"Host: {host['cpus']} CPUs, load average {host['loadavg_start'][0]:.2f} at the start and "
            f"{host['loadavg_end'][0]:.2f} at the end (other jobs ran meanwhile), Python {host['python']}, kernel "
            f"{host['kernel']}.\n\n{footer(record)}\n")
    print(text)
    out.mkdir(parents=True, exist_ok=True)
    (out/"filter.md").write_text("# Grading cost: the warm sandbox with and without the system-call filter"
                                 f"{' (smoke)' if args.smoke else ''}\n\n" + text)
    (out/"filter.json").write_text(json.dumps({"provenance": record, "smoke": args.smoke, "rows": rows,
                                               "checks": checks, **host}, indent=1) + "\n")

if __name__ == "__main__": main()
