#!/usr/bin/env bash
# Two pocket builds with `scripts/build_pocket.py --deterministic`, each in its own process, from the default recipe:
# are the weights the same bit for bit? Usage, from the repository root on a GPU host:
#   bash benchmarks/pocket_build_twice/pocket_build_twice.sh [--out DIR] [--steps STEPS] [--smoke]
# Writes DIR/pocket_build_twice.json (DIR: beside this script unless --out): the SHA-256 of each build's
# model.safetensors, the steps, the device, the seconds and the run's provenance (benchmarks/provenance.py).
# --smoke: two CPU builds of one corpus seed, one step each, through build_pocket.py's own command line with its
# training recipe's batch made 2 sequences (the command line has no batch option), to a temporary folder: it checks
# the script.
set -euo pipefail
benchmarks=$(cd "$(dirname "$0")/.." && pwd)
out=""; steps=300; smoke=0; args="$*"
while [ $# -gt 0 ]; do
  case $1 in
    --out) out=$2; shift 2;;
    --steps) steps=$2; shift 2;;
    --smoke) smoke=1; shift;;
    *) echo "unknown argument $1: expected --out DIR, --steps STEPS, --smoke" >&2; exit 2;;
  esac
done
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
out=$(python - "$benchmarks" "$out" "$smoke" <<'PY'
import sys
sys.path.insert(0, sys.argv[1])
from provenance import results_dir
print(results_dir(sys.argv[2] or None, sys.argv[3] == "1", sys.argv[1] + "/pocket_build_twice/pocket_build_twice.sh"))
PY
)
cd "$benchmarks/.."
python - "$args" > "$work/provenance.json" <<'PY'   # the code as it is when the builds start
import json, sys
sys.path.insert(0, "benchmarks")
from provenance import provenance
command = "bash benchmarks/pocket_build_twice/pocket_build_twice.sh " + sys.argv[1]
print(json.dumps({**provenance(), "command": command.strip()}))
PY
[ "$smoke" = 1 ] && steps=1
build() {  # one build into $1, in its own process
  if [ "$smoke" = 1 ]; then
    python - "$1" > "$1.log" <<'PY'
import dataclasses, runpy, sys
import gradient_quarantine.pocket as pocket

@dataclasses.dataclass(frozen=True)
class SmokeRecipe(pocket.TrainRecipe):
    batch_size: int = 2                                   # a smoke's training step: 2 sequences

pocket.TrainRecipe = SmokeRecipe                          # what build_pocket.py imports from the module
sys.argv = ["scripts/build_pocket.py", "--out", sys.argv[1], "--steps", "1", "--recipe", '{"seeds": [0]}',
            "--device", "cpu", "--deterministic"]
runpy.run_path("scripts/build_pocket.py", run_name="__main__")
PY
  else
    python scripts/build_pocket.py --out "$1" --steps "$steps" --deterministic > "$1.log"
  fi
}
for b in 1 2; do build "$work/build$b"; done
mkdir -p "$out"
python - "$work" "$out" "$steps" <<'PY'
import hashlib, json, sys
from importlib.metadata import version
from pathlib import Path
work, out, steps = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
builds = [{"sha256": hashlib.sha256((work/f"build{b}"/"model.safetensors").read_bytes()).hexdigest(),
           "card": json.loads((work/f"build{b}"/"pocket_card.json").read_text())} for b in (1, 2)]
record = json.loads((work/"provenance.json").read_text())
row = {"device": [b["card"]["device"] for b in builds], "gpus": record["device"]["gpus"], "torch": version("torch"),
       "steps": steps, "sha256": [b["sha256"] for b in builds], "identical": builds[0]["sha256"] == builds[1]["sha256"],
       "deterministic_algorithms": [b["card"]["deterministic_algorithms"] for b in builds],
       "corpus_sha256": [b["card"]["corpus_sha256"] for b in builds],
       "seconds": [round(b["card"]["seconds"], 1) for b in builds], "provenance": record}
(out/"pocket_build_twice.json").write_text(json.dumps(row, indent=1) + "\n")
print(json.dumps(row, indent=1))
PY
