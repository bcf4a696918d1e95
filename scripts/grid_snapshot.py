"""Snapshot a grid in progress for the next machine: OUT/state.tar.gz holds runs/ without the rollouts of complete runs
(enough to resume: configs, logs, checkpoints, evals); OUT/rollouts_N.tar.gz (under 15 MB each) hold those rollouts.

Usage: python scripts/grid_snapshot.py runs OUT
"""
import json, sys, tarfile
from pathlib import Path

runs, out = Path(sys.argv[1]), Path(sys.argv[2])
out.mkdir(parents=True, exist_ok=True)
def complete(run: Path) -> bool:
    s = run/"status.json"
    return s.exists() and json.loads(s.read_text()).get("complete", False)
done_rollouts = [r/"rollouts.jsonl.gz" for r in sorted(runs.iterdir()) if r.is_dir() and complete(r) and (r/"rollouts.jsonl.gz").exists()]
skip = set(done_rollouts)
with tarfile.open(out/"state.tar.gz", "w:gz") as t:
    t.add(runs, filter=lambda ti: None if Path(ti.name) in skip or ti.name.endswith(".tmp") else ti)
chunk, size, n = [], 0, 0
def flush():
    global chunk, size, n
    if not chunk: return
    with tarfile.open(out/f"rollouts_{n}.tar.gz", "w:gz") as t:
        for p in chunk: t.add(p)
    chunk, size, n = [], 0, n + 1
for p in done_rollouts:
    if size + p.stat().st_size > 15_000_000: flush()
    chunk.append(p); size += p.stat().st_size
flush()
print(f"snapshot: state {(out/'state.tar.gz').stat().st_size / 1e6:.1f} MB, {len(done_rollouts)} complete runs' rollouts in {n} files")
