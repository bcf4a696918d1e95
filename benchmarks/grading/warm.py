"""Grading cost on this machine: a fresh bubblewrap per program (old, `GQ_SANDBOX=cold`) against warm workers (new: one
bubblewrap per worker whose zygote forks a fresh, isolated child per program), side by side on the same jobs.

Workloads, as in `grading.py` beside it: the 119 canonical LeetCode solutions, a hostile mix, and pocket rollouts logged
by a training run (their logged labels must come out again). Per workload:

- serial: one `grade` per job in this process, the two paths alternated job by job (old-new, new-old, ...);
- grade_many: the package's `grade_many` on `--workers` grading processes (default: every core), in a child process per
  batch on a snapshot of the package, after a warm-up batch; the two paths alternated batch by batch (ABBA...).

Then every logged rollout of one grid run is replayed through both paths with `grade_many` (new first), and every label
must equal the logged one. Also measured: the wall time of one sandbox run of `pass`, old and new alternated.

Run: GQ_DATA_DIR=../shared/data/leetcode python benchmarks/grading/warm.py [--workers 16] [--out DIR]
(writes warm.md and warm.json beside it or to DIR, or NAME.md and NAME.json with --name NAME; --smoke: two jobs of each
workload, two hostile programs at a 0.5 s limit, one round, a replay of two rollouts, to a temporary folder)
"""
import argparse, json, os, platform, statistics, sys, time
from pathlib import Path
from unittest import mock
sys.path.insert(0, str(Path(__file__).parent))
from grading import (HOSTILE, LOGGED_LABELS, REPO, SMOKE_HOSTILE, alternated, batch, check_logged, pocket_jobs,
                     snapshot)
from gradient_quarantine import sandbox
from gradient_quarantine.problems import load_leetcode, assign_modes
from gradient_quarantine.results import GRID_DIR
from gradient_quarantine.rewards import MODES, fenced, grade, wrong_solution
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from provenance import footer, provenance, results_dir

ENVS = {"old": {"GQ_SANDBOX": "cold"}, "new": {"GQ_SANDBOX": "warm"}}
RUNS = {"old": sandbox._run_bwrap, "new": sandbox._run_warm}
RACING = ("memory bomb",)  # fills 1 GB in 1-2 s: at a 3 s limit on a busy machine, timed out or MemoryError first

def serial(jobs, timeout_s: float) -> dict:
    "Each job graded once per path in this process, alternating which goes first: wall seconds and grades per path."
    out = {arm: {"wall": [], "grades": []} for arm in ENVS}
    for i, job in enumerate(jobs):
        for arm in (list(ENVS) if i % 2 == 0 else list(ENVS)[::-1]):
            with mock.patch.dict(os.environ, ENVS[arm]):
                t0 = time.monotonic(); g = grade(*job, timeout_s=timeout_s)
                out[arm]["wall"].append(time.monotonic() - t0)
            out[arm]["grades"].append(g)
    return out

def pass_ms(n: int) -> dict:
    "Median and 90th-percentile wall ms of one sandbox run of `pass`, old and new alternated."
    times = {arm: [] for arm in RUNS}
    for i in range(n):
        for arm in (list(RUNS) if i % 2 == 0 else list(RUNS)[::-1]):
            t0 = time.perf_counter(); RUNS[arm]("pass", 3.0, 1024); times[arm].append((time.perf_counter() - t0) * 1e3)
    return {arm: {"median": round(statistics.median(t), 1), "p90": round(sorted(t)[int(0.9 * len(t))], 1)}
            for arm, t in times.items()}

def verdicts(g, name: str) -> dict:
    "A grade's fields, without `timed_out` for the one hostile program whose timeout is a race."
    return {k: v for k, v in g.to_dict().items() if not (k == "timed_out" and name in RACING)}

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--workers", type=int, default=os.cpu_count(),
                    help="grading processes for grade_many (default: every core)")
    ap.add_argument("--rounds", type=int, default=2, help="grade_many batches per path and workload (ABBA order)")
    ap.add_argument("--pocket-updates", type=int, default=5,
                    help="updates of logged rollouts (64 each) in the timed pocket workload")
    ap.add_argument("--timeout", type=float, default=30.0,
                    help="wall limit per program of the canonical and pocket workloads and the replay, none of which "
                         "hangs: generous, so that a loaded machine cannot time one out (the hostile mix: 3 s)")
    ap.add_argument("--skip-replay", action="store_true", help="a quick run: no replay of every logged rollout")
    ap.add_argument("--name", default="warm", help="the results' file names beside this script: NAME.md and NAME.json")
    ap.add_argument("--rollouts", default=str(REPO/GRID_DIR/"route2b_s43"/"rollouts.jsonl.gz"))
    ap.add_argument("--out", default=None, help="folder for the results (default: beside this script)")
    ap.add_argument("--smoke", action="store_true", help="two jobs per workload, two hostile programs at a 0.5 s "
                    "limit, one round, a replay of two rollouts, to a temporary folder: checks the script")
    args = ap.parse_args()
    args.out, args.provenance = results_dir(args.out, args.smoke, __file__), provenance()
    n, hostile_s = (2, 0.5) if args.smoke else (None, 3.0)
    if args.smoke: args.rounds, args.pocket_updates = 1, 1
    assert sandbox.engine_problem() is None and sandbox.warm_problem() is None, (
        sandbox.engine_problem(), sandbox.warm_problem())
    root = snapshot()
    test = load_leetcode("test")
    modes = assign_modes(test, MODES, seed=0)
    canon = [(fenced(p.canonical_solution), p, modes[p.id]) for p in test][:n]
    names = list(SMOKE_HOSTILE) if args.smoke else list(HOSTILE) * 2
    hostile = [(fenced(wrong_solution(p) + "\n" + HOSTILE[n]), p, modes[p.id])
               for p, n in zip(test[:len(names)], names)]
    pocket, pocket_rows = pocket_jobs(Path(args.rollouts), args.pocket_updates)
    pocket, pocket_rows = pocket[:n], pocket_rows[:n]
    host = {"cpus": os.cpu_count(), "workers": args.workers, "loadavg_start": os.getloadavg(),
            "python": platform.python_version(), "kernel": platform.release(), "timeout_s": args.timeout,
            "rounds": args.rounds, "passes": 2 if args.smoke else 60, "hostile_timeout_s": hostile_s}
    host["pass_ms"] = pass_ms(host["passes"])
    print(host, flush=True)
    rows = []
    for name, jobs, timeout_s in (
            (f"{len(canon)} canonical solutions", canon, args.timeout),
            (f"hostile mix ({len(hostile)} programs)", hostile, hostile_s),
            (f"pocket rollouts, updates 1-{args.pocket_updates} ({len(pocket)})", pocket, args.timeout)):
        t_start = time.monotonic()
        s = serial(jobs, timeout_s)
        many = alternated({arm: (lambda env=env: batch(root, jobs, timeout_s, env, args.workers))
                           for arm, env in ENVS.items()}, args.rounds)
        kinds = names if name.startswith("hostile") else [""] * len(jobs)
        races = {}
        for a, b, what in ((s["old"]["grades"], s["new"]["grades"], "serial"),
                           (many["old"]["grades"], many["new"]["grades"], "grade_many"),
                           (s["new"]["grades"], many["new"]["grades"], "new serial vs grade_many")):
            diff = [(k or j[1].id, x, y) for j, x, y, k in zip(jobs, a, b, kinds) if verdicts(x, k) != verdicts(y, k)]
            assert all(x.timed_out != y.timed_out for _, x, y in diff), f"{name}, {what}: the two disagree: {diff[:3]}"
            races[what] = [k for k, _, _ in diff]  # where one grading hit the time limit and the other did not
        if name.endswith("canonical solutions"):
            assert all(g.gt_correct for g in s["new"]["grades"]), "a canonical solution failed"
        elif name.startswith("hostile"):
            assert not any(g.gt_correct for g in s["new"]["grades"]), "a hostile program was judged correct"
        else:
            for arm in ENVS:
                check_logged(s[arm]["grades"], pocket_rows, f"{name}, {arm}")
                check_logged(many[arm]["grades"], pocket_rows, name)
        row = {"workload": name, "n": len(jobs), "timeout_s": timeout_s}
        for arm in ENVS:
            row[f"serial_ms_{arm}"] = round(statistics.mean(s[arm]["wall"]) * 1e3, 1)
            row[f"serial_median_ms_{arm}"] = round(statistics.median(s[arm]["wall"]) * 1e3, 1)
            row[f"grade_many_s_{arm}"] = [round(t, 2) for t in many[arm]["seconds"]]
            row[f"programs_per_s_{arm}"] = round(len(jobs) / statistics.median(many[arm]["seconds"]), 2)
        row["serial_ratio"] = round(row["serial_ms_old"] / row["serial_ms_new"], 2)
        row["programs_per_s_ratio"] = round(row["programs_per_s_new"] / row["programs_per_s_old"], 2)
        row["timeout_races"] = races
        row["bench_s"] = round(time.monotonic() - t_start, 1)
        rows.append(row); print(row, flush=True)
    full, full_rows = pocket_jobs(Path(args.rollouts), None)
    full, full_rows = full[:n], full_rows[:n]
    replay = {}
    for arm in () if args.skip_replay else ("new", "old"):
        seconds, grades = batch(root, full, args.timeout, ENVS[arm], args.workers)
        check_logged(grades, full_rows, f"all logged rollouts, {arm}")
        replay[arm] = {"seconds": round(seconds, 1), "programs_per_s": round(len(full) / seconds, 2),
                       "labels_equal_logged": True}
        print(arm, replay[arm], flush=True)
    host["replay"] = {"run": Path(args.rollouts).parent.name, "n": len(full), "labels": LOGGED_LABELS, **replay}
    host["loadavg_end"] = os.getloadavg()
    write(rows, host, args)

def write(rows, host, args):
    table = ["| workload | n | serial ms/program old | new | old/new | grade_many programs/s old | new | new/old |",
             "|" + "---|" * 8]
    table += [f"| {r['workload']} | {r['n']} | {r['serial_ms_old']} | {r['serial_ms_new']} | {r['serial_ratio']}x | "
              f"{r['programs_per_s_old']} | {r['programs_per_s_new']} | {r['programs_per_s_ratio']}x |" for r in rows]
    rp, pm = host["replay"], host["pass_ms"]
    races = {r["workload"]: {k: v for k, v in r["timeout_races"].items() if v} for r in rows}
    races = {w: r for w, r in races.items() if r} or "none"
    replayed = (f"Replay: all {rp['n']} logged rollouts of {rp['run']} through `grade_many` "
                f"({host['workers']} workers, {args.timeout:g} s per program): new {rp['new']['seconds']} s "
                f"({rp['new']['programs_per_s']}/s), old {rp['old']['seconds']} s ({rp['old']['programs_per_s']}/s); "
                f"every label ({', '.join(rp['labels'])}) equal to "
                f"the logged one under both.") if "new" in rp else "Replay: not run (--skip-replay)."
    text = ("\n".join(table) + "\n\n"
            f"Old: a fresh bubblewrap and interpreter per program (`GQ_SANDBOX=cold`); new: warm workers, one "
            f"bubblewrap per worker whose zygote forks a fresh child per program into new mount, IPC, PID and network "
            f"namespaces, fresh tmpfs and a fresh uid (`GQ_SANDBOX` unset). The grader around them is the working "
            f"tree's in both.\n\n"
            f"- serial ms/program: mean wall time of one `grade` (one or two sandbox runs) in this process, the paths "
            f"alternated job by job;\n- grade_many programs/s: `grade_many` on {host['workers']} grading processes in "
            f"a child process per batch, after a warm-up batch, {host['rounds']} batches per path in ABBA order; "
            f"programs/s from the median batch.\n\n"
            f"One sandbox run of `pass` ({host['passes']} alternated): old {pm['old']['median']} ms median "
            f"({pm['old']['p90']} ms p90), new {pm['new']['median']} ms ({pm['new']['p90']} ms p90).\n\n"
            f"Verdicts: every job graded the same by both paths, serially and with grade_many, except where one "
            f"grading hit the time limit and the other did not (a race with the limit, not isolation; the hostile "
            f"memory bomb's `timed_out` is not compared, it fills 1 GB in 1-2 s): {races}; all "
            f"{rows[0]['n']} canonical solutions "
            f"gt_correct; no hostile program gt_correct; the timed pocket rollouts carry their logged labels "
            f"under both.\n\n"
            f"{replayed}\n\n"
            f"Host: {host['cpus']} CPUs, load average {host['loadavg_start'][0]:.2f} at the start and "
            f"{host['loadavg_end'][0]:.2f} at the end (other jobs ran meanwhile), Python {host['python']}, "
            f"kernel {host['kernel']}. Hostile programs at a {host['hostile_timeout_s']:g} s limit.\n\n"
            f"{footer(args.provenance)}\n")
    print(text)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out/f"{args.name}.md").write_text("# Grading cost: a fresh bubblewrap per program vs warm workers"
                                            f"{' (smoke)' if args.smoke else ''}\n\n" + text)
    (args.out/f"{args.name}.json").write_text(json.dumps({"provenance": args.provenance, "smoke": args.smoke,
                                                          "rows": rows, **host}, indent=1) + "\n")

if __name__ == "__main__": main()
