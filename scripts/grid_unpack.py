"""Unpack a device snapshot of a grid (scripts/grid_snapshot.py's state.tar.gz) into the committed form of that grid.

Only complete runs (in the snapshot or already committed) are taken, as the repository keeps them: config.json,
status.json, metrics.jsonl, the evaluations gzipped (eval/<state>.json.gz), the executed notebook gzipped beside the run
(<run>.ipynb.gz) and, once written, the scores of its checkpoints (eval_curve.jsonl, with its notebook gzipped; a curve
still being scored is left out). Checkpoints and trainer states stay out, and so do the rollout logs, except those of
the runs the --rollouts patterns name (from the snapshot's rollouts_N.tar.gz files, passed after the state). The grid's
record (<grid>.json or answer.json) is replaced by the snapshot's, which holds every process's cells. A run that is
already committed is left alone unless its files differ, which is an error: a complete run never changes.

A run that finished between two calls has files in both calls' snapshots, so every call's state.tar.gz is passed, in
order, in one command; a complete run that still lacks its config, metrics, status or deploy evaluation is an error.

Usage: python scripts/grid_unpack.py runs/answer STATE_TAR_GZ [STATE_TAR_GZ ...] [ROLLOUTS_TAR_GZ ...] \
           [--rollouts 'route2b_*' ...]
"""
import argparse, fnmatch, gzip, json, tarfile
from pathlib import Path

KEPT = ("config.json", "status.json", "metrics.jsonl")

def packed(name: str, data: bytes) -> tuple[str, bytes]:
    "The committed name and bytes of a snapshot file (evaluations and notebooks gzipped, deterministically)."
    if name.endswith((".ipynb", ".json")) and ("/eval/" in name or name.endswith(".ipynb")):
        return name + ".gz", gzip.compress(data, mtime=0)
    return name, data

def unpack(tars: list[Path], grid: Path, rollouts: list[str]) -> tuple[int, int]:
    files = {}
    for tar in tars:
        with tarfile.open(tar) as t:
            files.update({m.name: t.extractfile(m).read() for m in t.getmembers() if m.isfile()})
    prefix = f"{grid.as_posix().rstrip('/')}/"
    complete = {n[len(prefix):-len("/status.json")] for n, b in files.items()
                if n.startswith(prefix) and n.endswith("/status.json") and json.loads(b).get("complete")}
    complete |= {s.parent.name for s in grid.glob("*/status.json") if json.loads(s.read_text()).get("complete")}
    scored = {n[len(prefix):-len("/eval_curve.jsonl")] for n in files if n.endswith("/eval_curve.jsonl")}
    added = same = 0
    for name, data in sorted(files.items()):
        rel = name[len(prefix):] if name.startswith(prefix) else None
        if rel is None: continue
        run = rel.split("/")[0].removesuffix(".ipynb")
        record = rel.endswith(".json") and "/" not in rel
        wanted = record or run in complete and (
            rel == f"{run}.ipynb" or rel.split("/")[-1] in KEPT and rel.count("/") == 1
            or rel.startswith(f"{run}/eval/")
            or rel in (f"{run}/eval_curve.jsonl", f"{run}/eval_curve.ipynb") and run in scored
            or rel == f"{run}/rollouts.jsonl.gz" and any(fnmatch.fnmatch(run, r) for r in rollouts))
        if not wanted: continue
        out_name, out = packed(name, data)
        path = Path(out_name)
        if path.exists() and not record:
            if path.read_bytes() != out and not (path.suffix == ".gz" and gzip.decompress(path.read_bytes()) == data):
                raise SystemExit(f"{path} is committed with other contents: a complete run never changes")
            same += 1; continue
        path.parent.mkdir(parents=True, exist_ok=True); path.write_bytes(out); added += not record
    lacking = {run: [f for f in (*KEPT, "eval/deploy.json.gz") if not (grid/run/f).exists()] for run in complete}
    lacking = {run: fs for run, fs in lacking.items() if fs}
    if lacking: raise SystemExit(f"complete runs lack files, {lacking}: a run that finished between two calls has its "
                                 "files in both snapshots; pass every call's state.tar.gz, in order, in one command")
    return added, same

if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("grid", type=Path, help="the grid's directory, e.g. runs/answer")
    ap.add_argument("tars", type=Path, nargs="+", help="the snapshot's state.tar.gz, then any rollouts_N.tar.gz")
    ap.add_argument("--rollouts", nargs="*", default=[], help="run-name patterns whose rollout logs are kept")
    a = ap.parse_args()
    added, same = unpack(a.tars, a.grid, a.rollouts)
    print(f"{added} files added, {same} already committed and identical")
