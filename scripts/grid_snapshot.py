"""Snapshot a grid in progress so that the next machine can resume it,
in files small enough to come back from a device call.

OUT/state.tar.gz   configs, status, metrics, evals, eval curves, executed notebooks, grid.json (everything small);
OUT/resume_N.tar.gz what only unfinished work needs: the rollouts log and the latest trainer state of incomplete runs,
                    and the knob checkpoints of runs whose eval curve is not written yet;
OUT/rollouts_N.tar.gz the rollouts logs of complete runs;  OUT/logs.tar.gz the last 64 kB of every papermill log.
Each file stays under 15 MB; older trainer states and the checkpoints of finished runs are left out (not needed).

Only files changed since the optional STAMP file's time are taken (the committed runs a machine started from are not
sent back). Only runs whose names match the optional CURVES pattern get an eval curve, so only theirs keep the knob
checkpoints once complete (default: every run, as in runs/grid).

Usage: python scripts/grid_snapshot.py runs/grid OUT [STAMP [CURVES]]
"""
import fnmatch, io, json, sys, tarfile
from pathlib import Path

LIMIT, LOG_TAIL = 14_000_000, 65_536
runs, out = Path(sys.argv[1]), Path(sys.argv[2])
since = Path(sys.argv[3]).stat().st_mtime if len(sys.argv) > 3 else 0.0
curves = sys.argv[4] if len(sys.argv) > 4 else "*"
out.mkdir(parents=True, exist_ok=True)

def complete(run: Path) -> bool:
    s = run/"status.json"
    return s.exists() and json.loads(s.read_text()).get("complete", False)

def latest_trainer(run: Path):
    states = sorted((run/"checkpoints").glob("update_*.trainer.pt"))
    return states[-1] if states else None

state, resume, rollouts, logs = [], [], [], []
changed = (q for q in runs.rglob("*") if q.is_file() and not q.name.endswith(".tmp") and q.stat().st_mtime > since)
for p in sorted(changed):
    parts = p.relative_to(runs).parts
    run = runs/parts[0]
    if parts[0] in ("grid_logs", "logs") and p.suffix in (".log", ".out"): logs.append(p)
    elif p.name == "rollouts.jsonl.gz": (rollouts if complete(run) else resume).append(p)
    elif "checkpoints" in parts:
        if (run/"eval_curve.jsonl").exists() or complete(run) and not fnmatch.fnmatch(run.name, curves): continue
        if p.name.endswith(".trainer.pt") and (complete(run) or p != latest_trainer(run)): continue
        resume.append(p)
    else: state.append(p)

def write(name: str, files):
    with tarfile.open(out/name, "w:gz") as t:
        for f in files: t.add(f)

def chunks(prefix: str, files):
    batch, size, n = [], 0, 0
    for f in files:
        if batch and size + f.stat().st_size > LIMIT:
            write(f"{prefix}_{n}.tar.gz", batch); batch, size, n = [], 0, n + 1
        batch.append(f); size += f.stat().st_size
    if batch: write(f"{prefix}_{n}.tar.gz", batch)

write("state.tar.gz", state)
chunks("resume", resume); chunks("rollouts", rollouts)
with tarfile.open(out/"logs.tar.gz", "w:gz") as t:
    for f in logs:
        data = f.read_bytes()[-LOG_TAIL:]
        info = tarfile.TarInfo(str(f)); info.size = len(data); t.addfile(info, io.BytesIO(data))
sizes = {p.name: round(p.stat().st_size / 1e6, 1) for p in sorted(out.glob("*.tar.gz"))}
print(f"snapshot (MB): {sizes}; {len(rollouts)} complete runs' rollouts")
