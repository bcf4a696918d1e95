"""The pocket main job on this CPU: the code of one commit (old) against another (new), side by side.

Short runs: the pocket preset (route2b, `--seed`, `--steps` updates, evaluation on `--eval-n` test problems), each in a
fresh process run straight through `Trainer`, old and new in turn (every other round new first). Each run records its
setup, training and evaluation seconds, each update's split from metrics.jsonl, the minor page faults and peak memory of
the process, the load average and the CPU seconds that other processes on the machine used meanwhile (`foreign`: the
machine is shared, so compare old and new within a round). All runs of one seed must log the same metrics (timing fields
aside), the same rollouts, the same evaluations and the same knobs at every checkpoint: the script checks and says so.

`--whole`: then the README's command, `papermill nbs/05_train.ipynb OUT -p seed 43` (with `-p run_dir` in a temporary
directory, so nothing tracked changes), under `/usr/bin/time -v`, old then new, each from its own checkout.

Run from the repository root: python benchmarks/cpu_job/cpu_job.py --old /tmp/old --new . [--whole]
(`git worktree add /tmp/old COMMIT` makes the old checkout; writes benchmarks/cpu_job/cpu_job.md and .json, or to
--out DIR). --smoke: one round of a tiny run (smoke.SMOKE_RUN) with the working tree as both old and new unless
--old/--new say otherwise, to a temporary folder; it leaves out --whole (two papermill runs of the main notebook, which
nbs/05b_papermill_checks runs in the tests).
"""
import argparse, atexit, gzip, json, os, platform, resource, shutil, statistics, subprocess, sys, tempfile, time
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from provenance import cpu_model, footer, provenance, results_dir
from smoke import SMOKE_RUN

CHILD = r'''
import json, resource, sys, time
t0 = time.time()
from gradient_quarantine.config import resolve_config
from gradient_quarantine.train import Trainer
run, run_dir = json.loads(sys.argv[1]), sys.argv[2]
t1 = time.time()
trainer = Trainer(resolve_config(run_dir=run_dir, **run), progress=False)
t2 = time.time(); spans = {}
evaluate = trainer.evaluate
def timed_evaluate():
    start = time.time(); out = evaluate(); spans["eval"] = time.time() - start; return out
trainer.evaluate = timed_evaluate
trainer.run(rerun=True)
ru = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"import_s": t1 - t0, "setup_s": t2 - t1, "run_s": time.time() - t2, "eval_s": spans["eval"],
                  "minor_faults": ru.ru_minflt, "max_rss_mb": ru.ru_maxrss / 1024}))
'''

def busy_cpu_seconds() -> float:
    "CPU seconds the whole machine has spent busy since boot (all cores, /proc/stat)."
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n")[0].split()[1:]]
    return (sum(fields) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")          # less idle and iowait

def measured(cmd: list[str], env: dict, cwd: str) -> tuple[subprocess.CompletedProcess, dict]:
    "Run CMD; its wall seconds, its CPU seconds, the CPU seconds of everything else, the load average around it."
    load0, busy0, kids0 = os.getloadavg()[0], busy_cpu_seconds(), resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.time()
    proc = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True)
    wall, kids1 = time.time() - t0, resource.getrusage(resource.RUSAGE_CHILDREN)
    own = (kids1.ru_utime - kids0.ru_utime) + (kids1.ru_stime - kids0.ru_stime)
    if proc.returncode: raise RuntimeError(f"{cmd} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return proc, {"wall_s": wall, "cpu_s": own, "foreign_cpu_s": busy_cpu_seconds() - busy0 - own,
                  "load_before": load0, "load_after": os.getloadavg()[0]}

def short_run(side: str, checkout: Path, run: dict, run_dir: Path) -> dict:
    "One short run (RUN: its config) of CHECKOUT in a fresh process; its timings and each update's split."
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    cmd = [sys.executable, "-c", CHILD, json.dumps(run), str(run_dir)]
    proc, outside = measured(cmd, env, str(checkout))
    rows = [json.loads(l) for l in open(run_dir/"metrics.jsonl")]
    keys = ("s_generate", "s_grade", "s_backward", "s_optimizer")
    return {"side": side, **json.loads(proc.stdout.strip().splitlines()[-1]), **outside, "run_dir": str(run_dir),
            "updates": [{"update": r["update"], **{k: r[k] for k in keys}} for r in rows]}

def results_of(run_dir: Path) -> dict:
    "What a run computed, timing fields aside: metrics, rollouts, both evaluations and every checkpoint's knobs."
    from safetensors.torch import load_file
    metrics = [{k: v for k, v in json.loads(l).items() if not k.startswith("s_")}
               for l in open(run_dir/"metrics.jsonl")]
    rollouts = [json.loads(l) for l in gzip.open(run_dir/"rollouts.jsonl.gz", "rt")]
    evals = {s: json.loads((run_dir/"eval"/f"{s}.json").read_text()) for s in ("deploy", "trained")}
    knobs = {p.name: {k: t.numpy().tobytes().hex() for k, t in sorted(load_file(p).items())}
             for p in sorted((run_dir/"checkpoints").glob("*.safetensors"))}
    return {"metrics": metrics, "rollouts": rollouts, "evals": evals, "knobs": knobs}

def same_results(dirs: list[Path]) -> dict:
    """Per part, whether every run computed it bit for bit as the first did; knobs at the checkpoints all runs saved (a
    checkpoint also falls due by the clock, `checkpoint_minutes`, so the runs' sets can differ)."""
    first, out = results_of(dirs[0]), {}
    for d in dirs[1:]:
        other = results_of(d)
        common = sorted(set(first["knobs"]) & set(other["knobs"]))
        first_common = {**first, "knobs": {k: first["knobs"][k] for k in common}}
        other = {**other, "knobs": {k: other["knobs"][k] for k in common}}
        for part in first: out[part] = out.get(part, True) and json.dumps(first_common[part]) == json.dumps(other[part])
        out["checkpoints_compared"] = min(out.get("checkpoints_compared", len(common)), len(common))
    return out

def whole_job(side: str, checkout: Path, tmp: Path) -> dict:
    "The README's command from CHECKOUT under /usr/bin/time -v (run_dir in TMP); its wall time and peak memory."
    out, log = tmp/f"whole_{side}.ipynb", tmp/f"whole_{side}.time"
    cmd = ["/usr/bin/time", "-v", "-o", str(log), "papermill", "nbs/05_train.ipynb", str(out), "-p", "seed", "43",
           "-p", "run_dir", str(tmp/f"whole_{side}")]
    _, outside = measured(cmd, {**os.environ, "PYTHONPATH": str(checkout)}, str(checkout))
    fields = dict(l.strip().rsplit(": ", 1) for l in log.read_text().splitlines() if ": " in l)
    rows = [json.loads(l) for l in open(tmp/f"whole_{side}"/"metrics.jsonl")]
    split = {k: sum(r[k] for r in rows) for k in ("s_generate", "s_grade", "s_backward", "s_optimizer")}
    evals = {s: json.loads((tmp/f"whole_{side}"/"eval"/f"{s}.json").read_text()) for s in ("deploy", "trained")}
    return {"side": side, **outside, "elapsed": fields.get("Elapsed (wall clock) time (h:mm:ss or m:ss)"),
            "max_rss_mb": int(fields.get("Maximum resident set size (kbytes)", 0)) / 1024,
            "minor_faults": int(fields.get("Minor (reclaiming a frame) page faults", 0)), "train_split_s": split,
            "updates": len(rows), **{f"{s}_hack_solve": (evals[s]["hack"], evals[s]["solve"]) for s in evals},
            "run_dir": str(tmp/f"whole_{side}")}

def verdict(same: dict) -> str:
    parts = [f"{k} {'bit-identical' if v else 'DIFFERENT'}" for k, v in same.items() if k != "checkpoints_compared"]
    return ", ".join(parts) + f" (knobs at the {same.get('checkpoints_compared', 0)} checkpoints every run saved)"

def median(xs): return statistics.median(xs) if xs else float("nan")

def markdown(report: dict) -> str:
    runs, a = report["runs"], report["args"]
    run = report["run"]
    lines = [f"# The {run['preset']} job on this CPU: old ({a['old_commit'][:7]}) against new "
             f"({a['new_commit'][:7]})", "",
             f"{report['machine']}. Short runs: {run['preset']} preset, route2b, seed {run['seed']}, {run['steps']} "
             f"updates, evaluation on {run['eval_n']} test problems, each in a fresh process through `Trainer`; "
             "old and new in turn, every other round new first. *foreign*: CPU seconds other processes used "
             "during the run (the machine is shared); *load*: the 1-minute load average before the run.", "",
             "| round | side | load | foreign CPU s | wall s | setup s | generate s/update | grade wait s/update "
             "| learn s/update | eval s | minor faults | peak MB |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in runs:
        u = r["updates"]
        lines.append(f"| {r['round']} | {r['side']} | {r['load_before']:.1f} | {r['foreign_cpu_s']:.0f} "
                     f"| {r['wall_s']:.1f} | {r['setup_s']:.1f} | {median([x['s_generate'] for x in u]):.2f} "
                     f"| {median([x['s_grade'] for x in u]):.2f} | {median([x['s_backward'] for x in u]):.2f} "
                     f"| {r['eval_s']:.1f} | {r['minor_faults']:,} | {r['max_rss_mb']:.0f} |")
    lines += ["", "Old over new, per round (above 1: new is faster):", "",
              "| round | wall | generate | learn | eval |", "|---|---|---|---|---|"]
    for k, ratio in sorted(report["ratios"].items()):
        lines.append(f"| {k} | {ratio['wall']:.2f} | {ratio['generate']:.2f} | {ratio['learn']:.2f} | "
                     f"{ratio['eval']:.2f} |")
    if runs: lines += ["", f"Same results across all {len(runs)} runs: {verdict(report['same_results'])}."]
    for w in report.get("whole", []):
        lines += ["", f"Whole job, {w['side']}: `/usr/bin/time -v papermill nbs/05_train.ipynb OUT -p seed 43` "
                  f"(run_dir in /tmp): **{w['elapsed']}** ({w['wall_s']:.0f} s), "
                  f"load {w['load_before']:.1f} before and {w['load_after']:.1f} after, "
                  f"{w['foreign_cpu_s']:.0f} foreign CPU s, peak {w['max_rss_mb']:.0f} MB, "
                  f"{w['minor_faults']:,} minor faults; training split (sum over {w['updates']} updates): "
                  + ", ".join(f"{k[2:]} {v:.0f} s" for k, v in w["train_split_s"].items())
                  + f"; deploy hack/solve {w['deploy_hack_solve'][0]:.3f}/{w['deploy_hack_solve'][1]:.3f}."]
    if "whole_same" in report: lines += ["", f"Whole jobs, old against new: {report['whole_same']}."]
    lines += ["", f"`python benchmarks/cpu_job/cpu_job.py {a['argv']}` took {report['seconds'] / 60:.1f} minutes.",
              "", footer(report["provenance"])]
    return "\n".join(lines) + "\n"

def commit_of(path: Path) -> str:
    return subprocess.run(["git", "rev-parse", "HEAD"], cwd=path, capture_output=True, text=True).stdout.strip()

def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--old", default=None, help="the old checkout (required, except in a smoke: the working tree)")
    p.add_argument("--new", default=".")
    p.add_argument("--rounds", type=int, default=2); p.add_argument("--seed", type=int, default=7)
    p.add_argument("--steps", type=int, default=3); p.add_argument("--eval-n", type=int, default=16)
    p.add_argument("--whole", action="store_true", help="also the README's whole command, old then new")
    p.add_argument("--out", default=None, help="folder for the results (default: beside this script)")
    p.add_argument("--smoke", action="store_true", help="one round of a tiny run, old = new = the working tree unless "
                   "--old says otherwise, to a temporary folder: checks the script")
    args = p.parse_args()
    if args.old is None and not args.smoke: p.error("--old is required (except with --smoke)")
    if args.smoke and args.whole: p.error("a smoke leaves out --whole (two papermill runs of the main notebook)")
    out, record = results_dir(args.out, args.smoke, __file__), provenance()
    run = ({**SMOKE_RUN, "seed": args.seed} if args.smoke else
           {"preset": "pocket", "seed": args.seed, "steps": args.steps, "eval_n": args.eval_n})
    if args.smoke: args.rounds = 1
    t0, tmp = time.time(), Path(tempfile.mkdtemp(prefix="cpu_job_"))
    atexit.register(shutil.rmtree, tmp, True)                             # the runs: what they computed is compared
    root = Path(__file__).resolve().parents[2]
    checkouts = {"old": Path(args.old).resolve() if args.old else root, "new": Path(args.new).resolve()}
    runs, ratios = [], {}
    for rnd in range(1, args.rounds + 1):
        order = ("old", "new") if rnd % 2 else ("new", "old")
        pair = {}
        for side in order:
            r = short_run(side, checkouts[side], run, tmp/f"r{rnd}_{side}")
            runs.append({"round": rnd, **r}); pair[side] = r
            print(f"round {rnd} {side}: {r['wall_s']:.1f} s (load {r['load_before']:.1f})", file=sys.stderr)
        m = lambda r, k: median([x[k] for x in r["updates"]])
        ratios[str(rnd)] = {"wall": pair["old"]["wall_s"] / pair["new"]["wall_s"],
                            "generate": m(pair["old"], "s_generate") / m(pair["new"], "s_generate"),
                            "learn": m(pair["old"], "s_backward") / m(pair["new"], "s_backward"),
                            "eval": pair["old"]["eval_s"] / pair["new"]["eval_s"]}
    report = {"provenance": record, "smoke": args.smoke, "run": run,
              "machine": f"{os.cpu_count()} CPUs ({cpu_model()}), Python "
                         f"{platform.python_version()}, {time.strftime('%Y-%m-%d', time.gmtime())}",
              "args": {**vars(args), "old_commit": commit_of(checkouts["old"]),
                       "new_commit": commit_of(checkouts["new"]), "argv": " ".join(sys.argv[1:])},
              "runs": runs, "ratios": ratios,
              "same_results": same_results([Path(r["run_dir"]) for r in runs]) if len(runs) > 1 else {}}
    if args.whole:
        report["whole"] = [whole_job(side, checkouts[side], tmp) for side in ("old", "new")]
        same = same_results([Path(w["run_dir"]) for w in report["whole"]])
        report["whole_same"] = verdict(same)
    report["seconds"] = time.time() - t0
    out.mkdir(parents=True, exist_ok=True)
    (out/"cpu_job.json").write_text(json.dumps(report, indent=1) + "\n")
    (out/"cpu_job.md").write_text(markdown(report))
    print(markdown(report))

if __name__ == "__main__": main()
