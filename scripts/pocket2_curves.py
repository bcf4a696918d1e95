"""Per-update training curves of pocket2 vanilla runs, for 08a_pocket2: per run (keyed by seed) and update, the logged
train hack and solve (metrics.jsonl) and, per mode, the rollouts and the exploited ones (rollouts.jsonl.gz), checked
against each other: an update's exploited rollouts over its rollouts must be its logged train hack.

Run from the repository root on the runs a session returned:
    python scripts/pocket2_curves.py --out data/pocket2_v3_vanilla_curves.json --source "..." RUN_DIR [RUN_DIR ...]
"""
import argparse, json
from pathlib import Path
from gradient_quarantine.artifacts import read_json, read_jsonl
from gradient_quarantine.rewards import MODES

ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ap.add_argument("runs", nargs="+"); ap.add_argument("--out", required=True)
ap.add_argument("--source", required=True, help="where the runs came from, recorded in the file")
a = ap.parse_args()
runs = {}
for d in map(Path, a.runs):
    cfg, metrics = read_json(d/"config.json"), sorted(read_jsonl(d/"metrics.jsonl"), key=lambda r: r["update"])
    updates = [r["update"] for r in metrics]
    if updates != list(range(1, cfg["steps"] + 1)): raise ValueError(f"{d}: logged updates {updates[:3]}... "
                                                                      f"are not 1..{cfg['steps']}")
    rollouts = read_jsonl(d/"rollouts.jsonl.gz")
    n = {m: [0] * len(updates) for m in MODES}; hit = {m: [0] * len(updates) for m in MODES}
    for r in rollouts:
        if r["mode"] in MODES: n[r["mode"]][r["update"] - 1] += 1; hit[r["mode"]][r["update"] - 1] += r["exploited"]
    for u, row in zip(updates, metrics):
        total = sum(1 for r in rollouts if r["update"] == u)
        if abs(sum(hit[m][u - 1] for m in MODES) / total - row["train_hack"]) > 1e-9:
            raise ValueError(f"{d}: update {u}'s rollouts do not give its logged train hack {row['train_hack']}")
    runs[str(cfg["seed"])] = {"update": updates, "train_hack": [r["train_hack"] for r in metrics],
                              "train_solve": [r["train_solve"] for r in metrics], "n_by_mode": n,
                              "exploited_by_mode": hit, "lr": cfg["lr"], "steps": cfg["steps"]}
Path(a.out).write_text(json.dumps({"source": a.source, "modes": list(MODES), "runs": runs}) + "\n")
print(f"{a.out}: {len(runs)} runs, {len(updates)} updates each")
