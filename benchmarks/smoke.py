"""Every benchmark's smoke, each in its own process: the runner that CI and `scripts/run_tests.sh` use.

It finds the benchmarks itself (every `benchmarks/<name>/*.py` and `*.sh`), so a new script without a `--smoke` mode
fails here. Each runs as `python SCRIPT --smoke --out DIR` (`bash SCRIPT --smoke --out DIR`) from the repository root
with a time limit, DIR a fresh temporary folder, --jobs of them at a time; it passes if it exits 0 and left at least one
JSON in DIR, every one with a complete provenance record. Prints one line per benchmark as it ends (name, wall seconds,
CPU seconds of it and the descendants it waited for, ok or FAILED and why, with the tail of its output), then
"benchmark smokes: N passed, N failed"; the exit status is 1 if any failed.

    python benchmarks/smoke.py [--only NAME ...] [--jobs N] [--timeout SECONDS] [--keep]
"""
import argparse, json, os, shutil, signal, subprocess, sys, tempfile, time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parent
ROOT = BENCHMARKS.parent
sys.path.insert(0, str(BENCHMARKS))
from provenance import FIELDS  # noqa: E402
# the training run a smoke makes where its benchmark makes pocket or full runs: the smoke preset's tiny model, one
# update of 2 prompts x 2 rollouts of 8 tokens, the direction from the 10 run_tests pairs, one test problem
SMOKE_RUN = {"preset": "smoke", "steps": 1, "prompts_per_update": 2, "group_size": 2, "max_new_tokens": 8,
             "pair_modes": ["run_tests"], "eval_n": 1, "eval_max_new_tokens": 8}

def cli_args(run: dict) -> list[str]:
    "A run's settings as `python -m gradient_quarantine.train` takes them: --preset smoke --steps 1 ..."
    return [x for k, v in run.items()
            for x in [f"--{k.replace('_', '-')}", *(map(str, v) if isinstance(v, list) else [str(v)])]]

def discover() -> list[Path]:
    "Every benchmark script: the .py and .sh files one folder below benchmarks/, in name order."
    return sorted(p for p in BENCHMARKS.glob("*/*") if p.suffix in (".py", ".sh") and p.is_file())

def name_of(script: Path) -> str: return str(script.relative_to(BENCHMARKS))

def command(script: Path, out: Path) -> list[str]:
    return [*(["bash"] if script.suffix == ".sh" else [sys.executable]), str(script), "--smoke", "--out", str(out)]

def missing_provenance(out: Path) -> str | None:
    "Why the JSON a smoke wrote to OUT falls short (none written, unreadable, a provenance field missing), or None."
    written = sorted(out.rglob("*.json")) if out.exists() else []
    if not written: return f"wrote no JSON to {out}"
    for path in written:
        try: record = json.loads(path.read_text())
        except ValueError as e: return f"{path.name} is not JSON: {e}"
        p = record.get("provenance") if isinstance(record, dict) else None
        lacking = [k for k in FIELDS if not isinstance(p, dict) or k not in p]
        if lacking: return f"{path.name} has no provenance {', '.join(lacking)}"
    return None

def wait_for(proc: subprocess.Popen, timeout: float) -> tuple[int | None, float]:
    ("PROC's exit status (None if it ran past TIMEOUT seconds: then it is killed) and the CPU seconds that it and the "
     "descendants it waited for used.")
    deadline, late = time.monotonic() + timeout, False
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid: break
        if time.monotonic() > deadline:
            os.killpg(proc.pid, signal.SIGKILL); _, status, usage = os.wait4(proc.pid, 0)
            late = True
            break
        time.sleep(0.1)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return (None if late else proc.returncode), usage.ru_utime + usage.ru_stime

def run_one(script: Path, work: Path, timeout: float) -> tuple[bool, float, float, str]:
    ("(passed, wall seconds, CPU seconds, why it failed and the tail of its output) of SCRIPT's smoke, in its own "
     "process group.")
    if "--smoke" not in script.read_text(): return False, 0.0, 0.0, "no --smoke mode"
    out, log = work/name_of(script).replace("/", "__"), work/(name_of(script).replace("/", "__") + ".log")
    # one torch thread unless the caller says otherwise: a smoke checks a code path, and beside other work one thread
    # is faster than two on two cores (benchmarks/threads)
    env = {"OMP_NUM_THREADS": "1", **os.environ,
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    t0 = time.monotonic()
    with open(log, "w") as sink:
        proc = subprocess.Popen(command(script, out), cwd=ROOT, env=env, stdout=sink, stderr=subprocess.STDOUT,
                                start_new_session=True)
        try: rc, cpu = wait_for(proc, timeout)
        finally:
            try: os.killpg(proc.pid, signal.SIGKILL)          # whatever it left running (graders, spinners)
            except ProcessLookupError: pass
    seconds = time.monotonic() - t0
    why = (f"no result within {timeout:.0f} s" if rc is None else f"exit status {rc}" if rc
           else missing_provenance(out))
    tail = "\n".join(log.read_text(errors="replace").splitlines()[-40:]) if why else ""
    return why is None, seconds, cpu, f"{why}\n{tail}" if why else ""

def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="+", default=None, help="run these only (names as printed, e.g. gpu/gpu.py)")
    ap.add_argument("--timeout", type=float, default=300, help="seconds one smoke may take")
    ap.add_argument("--jobs", type=int, default=2, help="smokes at a time (default 2: each uses about one core)")
    ap.add_argument("--keep", action="store_true", help="keep the smokes' output folders and logs (printed)")
    a = ap.parse_args(argv)
    scripts = discover()
    if a.only:
        unknown = sorted(set(a.only) - {name_of(s) for s in scripts})
        if unknown: ap.error(f"no benchmark {unknown}: the benchmarks are {[name_of(s) for s in scripts]}")
        scripts = [s for s in scripts if name_of(s) in a.only]
    work, t0, failed = Path(tempfile.mkdtemp(prefix="benchmark_smokes_")), time.monotonic(), 0
    try:
        with ThreadPoolExecutor(a.jobs) as pool:
            running = {pool.submit(run_one, script, work, a.timeout): script for script in scripts}
            for done in as_completed(running):
                ok, seconds, cpu, why = done.result()
                failed += not ok
                print(f"{name_of(running[done]):50s} {seconds:6.1f} s {cpu:6.1f} CPU s  "
                      f"{'ok' if ok else 'FAILED: ' + why}", flush=True)
    finally:
        if a.keep: print(f"outputs and logs kept in {work}")
        else: shutil.rmtree(work, ignore_errors=True)
    print(f"all smokes took {time.monotonic() - t0:.0f} s")
    print(f"benchmark smokes: {len(scripts) - failed} passed, {failed} failed")
    return 1 if failed else 0

if __name__ == "__main__": sys.exit(main())
