"""What every benchmark's saved results carry, and where they go.

`provenance()` is the record each benchmark's JSON holds under "provenance": the code's commit and whether the working
tree differed from it, the machine (CPU model and cores, GPU names and count), the date (UTC) and the command line.
`results_dir()` is the folder a script writes to: `--out`, else beside the script; a smoke writes to a new temporary
folder and refuses any folder under benchmarks/, so it never overwrites the committed results.

Scripts run as `python benchmarks/<name>/<script>.py` import it after `sys.path.insert(0, <benchmarks folder>)`.
"""
import os, platform, shlex, subprocess, sys, tempfile
from datetime import datetime, timezone
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parent
ROOT = BENCHMARKS.parent
FIELDS = ("commit", "dirty", "device", "date", "command")         # a provenance record's keys

def git(*args: str) -> str:
    "The output of a git command in the repository, or raise if git or the repository is missing."
    return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True, check=True).stdout.strip()

def source() -> dict:
    ("The commit HEAD names and whether the working tree differs from it (any tracked change or untracked file). "
     "A launcher that copied the tree elsewhere (a GPU host) names the commit it copied in GQ_COMMIT, which wins: a "
     "copy's own .git can be stale (one named a commit two behind the tree it ran). Outside a git checkout without "
     "GQ_COMMIT: None, with a warning. Dirty is None (unknown) whenever the commit is GQ_COMMIT's.")
    if os.environ.get("GQ_COMMIT"): return {"commit": os.environ["GQ_COMMIT"], "dirty": None}
    try: return {"commit": git("rev-parse", "HEAD"), "dirty": bool(git("status", "--porcelain"))}
    except (OSError, subprocess.CalledProcessError) as e:
        print(f"provenance: {ROOT} is no git checkout ({e}) and GQ_COMMIT is unset: the results record commit None",
              file=sys.stderr)
        return {"commit": None, "dirty": None}

def cpu_model() -> str:
    "The CPU's model name (/proc/cpuinfo on Linux)."
    cpuinfo = Path("/proc/cpuinfo")
    for line in cpuinfo.read_text().splitlines() if cpuinfo.exists() else []:
        if line.startswith("model name"): return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()

def gpu_names() -> list[str]:
    "The names of the host's NVIDIA GPUs (nvidia-smi; none where it is missing), without starting CUDA here."
    try: out = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                              text=True, timeout=30)
    except (FileNotFoundError, subprocess.TimeoutExpired): return []
    return [line.strip() for line in out.stdout.splitlines() if line.strip()] if out.returncode == 0 else []

def device() -> dict:
    "The machine: CPU model and cores, GPU names and count, and which GPUs CUDA_VISIBLE_DEVICES shows a run."
    gpus = gpu_names()
    return {"cpu": cpu_model(), "cpu_count": os.cpu_count(), "gpus": gpus, "gpu_count": len(gpus),
            "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES")}

def provenance() -> dict:
    "Commit, dirty tree, device, UTC date and command line of this run: a benchmark JSON's 'provenance' entry."
    record = {**source(), "device": device(), "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
              "command": shlex.join(["python", *sys.argv])}
    assert tuple(record) == FIELDS, tuple(record)
    return record

def footer(p: dict) -> str:
    "One markdown line naming a provenance record, for the end of a benchmark's markdown."
    d, commit = p["device"], (p["commit"] or "no commit")[:12]
    machine = f"{d['cpu']}, {d['cpu_count']} cores" + (f", {d['gpu_count']} x {d['gpus'][0]}" if d["gpus"] else "")
    return (f"Commit {commit}{' (working tree modified)' if p['dirty'] else ''}, {p['date']}, {machine}; "
            f"`{p['command']}`.")

def results_dir(out, smoke: bool, script: str) -> Path:
    ("Where SCRIPT (its __file__) writes: OUT if given, else beside the script; a smoke: OUT or a new temporary "
     "folder, never one under benchmarks/.")
    if out is None:
        return Path(tempfile.mkdtemp(prefix=f"{Path(script).stem}_smoke_")) if smoke else Path(script).resolve().parent
    out = Path(out).resolve()
    if smoke and out.is_relative_to(BENCHMARKS):
        raise SystemExit(f"a smoke writes no results under {BENCHMARKS} (the committed ones): --out {out}")
    return out
