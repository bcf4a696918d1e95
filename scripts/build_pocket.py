"""Build the pocket model (corpus -> tokenizer -> weights) on a GPU; the notebook nbs/08_pocket.ipynb explains each \
step.

Run from the repository root:
    python scripts/build_pocket.py --out gradient_quarantine/pocket_model [--steps N] [--recipe JSON] [--deterministic]
--recipe overrides fields of the corpus recipe, e.g. '{"p_train_marker": 0.1}' (the card records the recipe used).
--deterministic: deterministic GPU kernels, so that a build repeats bit for bit (two 300-step builds on one H100 gave
the same SHA-256: benchmarks/pocket_build_twice/pocket_build_twice.sh); slower once warm
(benchmarks/pocket_gpu_determinism/pocket_gpu_determinism.md). The shipped weights were built without it.
"""
import argparse, dataclasses, json
import torch
from gradient_quarantine.pocket import CorpusRecipe, TrainRecipe, build_pocket, deterministic_kernels

ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ap.add_argument("--out", required=True)
ap.add_argument("--steps", type=int, default=TrainRecipe.steps)
ap.add_argument("--recipe", type=json.loads, default={}, help="corpus recipe fields to override, as a JSON object")
ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
ap.add_argument("--deterministic", action="store_true", help="deterministic GPU kernels (bitwise reproducible, slower)")
args = ap.parse_args()
if args.deterministic: deterministic_kernels()
unknown = set(args.recipe) - {f.name for f in dataclasses.fields(CorpusRecipe)}
if unknown: ap.error(f"unknown corpus recipe fields {sorted(unknown)}: "
                     f"valid are {[f.name for f in dataclasses.fields(CorpusRecipe)]}")
recipe = CorpusRecipe(**{k: tuple(v) if isinstance(v, list) else v for k, v in args.recipe.items()})
print(json.dumps(build_pocket(args.out, corpus_recipe=recipe, train_recipe=TrainRecipe(steps=args.steps),
                              device=args.device), indent=1))
