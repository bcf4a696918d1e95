"""The two-rank resume's teardown, repeated under load: how often a rank dies at exit, before and after a fix.

A two-rank smoke run (gloo, `torchrun`) is killed after its first checkpoint, as `05f_distributed_checks` does; then
its resume is run again and again from a copy of that directory, beside BUSY processes that each spin one core, by
the code at each REV (a git worktree; `HEAD` is the working tree). Each resume must exit 0 on every rank; the table
counts the ones that did not, and the lines "terminate called" in their output. Prints a table and writes
teardown.json and teardown.md beside this file or to --out DIR (`--smoke`: one resume of the working tree, no load, a
tiny run of two updates, smoke.SMOKE_RUN's sizes, to a temporary folder).

    python benchmarks/teardown/teardown.py --rev 67214be --rev HEAD --repeats 15 50 --busy 2
"""
import argparse, json, os, shutil, signal, subprocess, sys, tempfile, time
from pathlib import Path

HERE, ROOT = Path(__file__).resolve().parent, Path(__file__).resolve().parents[2]
sys.path.insert(0, str(HERE.parent))
from provenance import footer, provenance, results_dir
from smoke import SMOKE_RUN, cli_args

# the run each resume finishes: killed after its first checkpoint, so it resumes with updates still to go
RUN = ["--preset", "smoke", "--steps", "3", "--eval-n", "1", "--checkpoint-every", "1", "--rollout-streams", "2"]
TINY_RUN = [*cli_args({**SMOKE_RUN, "steps": 2}), "--checkpoint-every", "1", "--rollout-streams", "2"]

def code_dir(rev: str, scratch: Path) -> Path:
    "The repository at REV: the working tree for HEAD, else a detached worktree in SCRATCH."
    if rev == "HEAD": return ROOT
    tree = scratch/f"tree_{rev}"
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(tree), rev], check=True,
                   capture_output=True)
    return tree

def command(code: Path, run_dir: Path, run: list[str]) -> tuple[list[str], dict]:
    env = {**os.environ, "PYTHONPATH": str(code), "PYTHONFAULTHANDLER": "1", "TORCH_SHOW_CPP_STACKTRACES": "1"}
    return ([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2", "-m",
             "gradient_quarantine.train", *run, "--run-dir", str(run_dir)], env)

def rank_pid(launcher: subprocess.Popen, rank: int) -> int:
    "The process of RANK among the launcher's children (torchrun's workers carry RANK in their environment)."
    for _ in range(600):
        for task in Path(f"/proc/{launcher.pid}/task").iterdir():
            for child in (task/"children").read_text().split():
                try: environ = Path(f"/proc/{child}/environ").read_bytes().split(b"\0")
                except OSError: continue
                if f"RANK={rank}".encode() in environ: return int(child)
        time.sleep(0.2)
    raise TimeoutError(f"no rank {rank} under {launcher.pid}")

def saved(run_dir: Path) -> Path: return run_dir.with_name(run_dir.name + "_saved")

def killed_run(code: Path, run_dir: Path, run: list[str]):
    "A two-rank run killed (rank 1, SIGKILL) once its first checkpoint is whole; a copy of it kept for every resume."
    cmd, env = command(code, run_dir, run)
    launcher = subprocess.Popen(cmd, env=env, cwd=code, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 600
    while not (run_dir/"checkpoints"/"update_0001.json").exists():
        if launcher.poll() is not None or time.monotonic() > deadline: raise RuntimeError("the run ended or stalled")
        time.sleep(0.1)
    os.kill(rank_pid(launcher, 1), signal.SIGKILL)
    if launcher.wait(300) == 0: raise RuntimeError("the killed run exited 0")
    shutil.copytree(run_dir, saved(run_dir))

def resume(code: Path, run_dir: Path, run: list[str]) -> dict:
    "One resume of the killed run in RUN_DIR, from its saved copy: exit status, time, and whether a rank aborted."
    shutil.rmtree(run_dir); shutil.copytree(saved(run_dir), run_dir)     # a run resumes where it was started
    cmd, env = command(code, run_dir, run)
    t0 = time.perf_counter()
    done = subprocess.run(cmd, env=env, cwd=code, capture_output=True, text=True, timeout=900)
    out = done.stdout + done.stderr
    failed = done.returncode != 0
    return {"rc": done.returncode, "s": round(time.perf_counter() - t0, 1), "terminate": out.count("terminate called"),
            "tail": out[-3000:] if failed else ""}

def measure(revs: list[str], repeats: list[int], busy: int, run: list[str]) -> dict:
    "Resumes of each REV's code, interleaved round by round, beside BUSY spinning processes."
    scratch = Path(tempfile.mkdtemp(prefix="teardown_"))
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(busy)]
    try:
        codes = {rev: code_dir(rev, scratch) for rev in revs}
        killed = {rev: scratch/f"killed_{rev}" for rev in revs}
        for rev in revs: killed_run(codes[rev], killed[rev], run)
        results = {rev: [] for rev in revs}
        for round_ in range(max(repeats)):
            for rev, n in zip(revs, repeats):
                if round_ < n:
                    results[rev].append(resume(codes[rev], killed[rev], run))
                    r = results[rev][-1]
                    print(f"round {round_ + 1}: {rev} rc {r['rc']} in {r['s']} s", flush=True)
        return results
    finally:
        for p in spinners: p.kill()
        for rev in revs:
            if rev != "HEAD": subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force",
                                              str(scratch/f"tree_{rev}")], capture_output=True)
        shutil.rmtree(scratch, ignore_errors=True)

def table(results: dict, busy: int) -> str:
    rows = ["| code | resumes | failed | 'terminate called' | median s |", "|---|---|---|---|---|"]
    for rev, rs in results.items():
        s = sorted(r["s"] for r in rs)
        rows.append(f"| {rev} | {len(rs)} | {sum(r['rc'] != 0 for r in rs)} | {sum(r['terminate'] > 0 for r in rs)} "
                    f"| {s[len(s) // 2]} |")
    return "\n".join([f"Two-rank resume of a killed smoke run, beside {busy} spinning processes "
                      f"({os.cpu_count()} cores)", "", *rows])

def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rev", action="append", help="code to run: a git revision, HEAD for the working tree")
    ap.add_argument("--repeats", type=int, nargs="+", default=[50], help="resumes of each --rev, in order")
    ap.add_argument("--busy", type=int, default=2, help="processes that each spin one core beside the resumes")
    ap.add_argument("--smoke", action="store_true", help="one resume of a tiny run of the working tree, no load")
    ap.add_argument("--out", default=None, help="folder for the results (default: beside this script)")
    args = ap.parse_args()
    out, record = results_dir(args.out, args.smoke, __file__), provenance()
    revs, repeats = (["HEAD"], [1]) if args.smoke else (args.rev or ["HEAD"], args.repeats)
    if len(repeats) != len(revs): ap.error(f"--repeats gives {len(repeats)} counts for {len(revs)} revisions")
    busy, run = (0, TINY_RUN) if args.smoke else (args.busy, RUN)
    results = measure(revs, repeats, busy, run)
    text = table(results, busy)
    print(text)
    out.mkdir(parents=True, exist_ok=True)
    (out/"teardown.json").write_text(json.dumps({"provenance": record, "smoke": args.smoke, "busy": busy,
                                                 "run": run, "results": results}, indent=1) + "\n")
    (out/"teardown.md").write_text(f"{text}\n\n{footer(record)}\n")
    # a failed resume is what the benchmark counts; in a smoke, it is a failure of the run itself
    if args.smoke and any(r["rc"] for r in results["HEAD"]):
        sys.exit("the resume failed:\n" + results["HEAD"][0]["tail"])

if __name__ == "__main__": main()
