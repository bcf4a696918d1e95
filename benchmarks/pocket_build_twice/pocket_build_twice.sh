#!/usr/bin/env bash
# Two pocket builds with `scripts/build_pocket.py --deterministic`, each in its own process, from the default recipe:
# are the weights the same bit for bit? Usage, from the repository root on a GPU host:
#   bash benchmarks/pocket_build_twice/pocket_build_twice.sh OUT_DIR [STEPS]
# Writes OUT_DIR/pocket_build_twice.json (SHA-256 of each build's model.safetensors, the steps, the GPU, the seconds).
set -euo pipefail
out=$1; steps=${2:-300}; work=$(mktemp -d); mkdir -p "$out"
for b in 1 2; do
  python scripts/build_pocket.py --out "$work/build$b" --steps "$steps" --deterministic > "$work/build$b.log"
done
python - "$work" "$out" "$steps" <<'PY'
import hashlib, json, sys, torch
from pathlib import Path
work, out, steps = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
builds = [{"sha256": hashlib.sha256((work/f"build{b}"/"model.safetensors").read_bytes()).hexdigest(),
           "card": json.loads((work/f"build{b}"/"pocket_card.json").read_text())} for b in (1, 2)]
row = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "steps": steps,
       "sha256": [b["sha256"] for b in builds], "identical": builds[0]["sha256"] == builds[1]["sha256"],
       "deterministic_algorithms": [b["card"]["deterministic_algorithms"] for b in builds],
       "corpus_sha256": [b["card"]["corpus_sha256"] for b in builds],
       "seconds": [round(b["card"]["seconds"], 1) for b in builds]}
(out/"pocket_build_twice.json").write_text(json.dumps(row, indent=1) + "\n")
print(json.dumps(row, indent=1))
PY
