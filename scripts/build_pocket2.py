"""Build the pocket2 model (corpus -> tokenizer -> weights); nbs/08a_pocket2.ipynb explains each step.

Run from the repository root:
    python scripts/build_pocket2.py --out DIR [--deterministic] [--steps N] [--recipe v1|...|v6]
    python scripts/build_pocket2.py --out DIR --smoke      # one recipe seed, a tiny model, three steps: seconds on CPU
--deterministic: deterministic GPU kernels, so that a build repeats bit for bit on one GPU and torch version (slower).
The card (DIR/pocket2_card.json) records the recipe, the hashes of the corpus and the weights, and each phase's time.
"""
import argparse, dataclasses, json
import torch
from gradient_quarantine.pocket import deterministic_kernels
from gradient_quarantine.pocket2 import (POCKET2_ARCH, POCKET2_TRAIN, POCKET2_VOCAB, SMOKE_ARCH, SMOKE_RECIPE,
                                         SMOKE_TRAIN, SMOKE_VOCAB, Pocket2Recipe, build_pocket2)

ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ap.add_argument("--out", required=True)
ap.add_argument("--steps", type=int,
                help=f"training steps (default {POCKET2_TRAIN.steps}; with --smoke {SMOKE_TRAIN.steps})")
ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
ap.add_argument("--deterministic", action="store_true", help="deterministic GPU kernels (bitwise reproducible, slower)")
ap.add_argument("--smoke", action="store_true", help="one recipe seed, a tiny model, three steps (seconds on CPU)")
ap.add_argument("--recipe", choices=("v1", "v2", "v3", "v4", "v5", "v6"), default="v6",
                help="the corpus recipe: v6 (default, Pocket2Recipe()), or v1 to v5 (Pocket2Recipe.v1() ...: "
                     "built and measured)")
args = ap.parse_args()
if args.deterministic: deterministic_kernels()
recipe, train, arch, vocab = ((SMOKE_RECIPE, SMOKE_TRAIN, SMOKE_ARCH, SMOKE_VOCAB) if args.smoke
                              else (Pocket2Recipe(), POCKET2_TRAIN, POCKET2_ARCH, POCKET2_VOCAB))
if args.recipe != "v6":                                      # with --smoke: that recipe on the smoke recipe's one seed
    recipe = getattr(Pocket2Recipe, args.recipe)(seeds=recipe.seeds)
if args.steps is not None: train = dataclasses.replace(train, steps=args.steps)
print(json.dumps(build_pocket2(args.out, recipe, train, arch, vocab, device=args.device), indent=1))
