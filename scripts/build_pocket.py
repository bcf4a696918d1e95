"""Build the pocket model (corpus -> tokenizer -> weights) on a GPU; the notebook nbs/08_pocket.ipynb explains each step.

Run from the repository root: python scripts/build_pocket.py --out gradient_quarantine/pocket_model [--steps N]
"""
import argparse, json
import torch
from gradient_quarantine.pocket import TrainRecipe, build_pocket

ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ap.add_argument("--out", required=True)
ap.add_argument("--steps", type=int, default=TrainRecipe.steps)
ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
args = ap.parse_args()
print(json.dumps(build_pocket(args.out, train_recipe=TrainRecipe(steps=args.steps), device=args.device), indent=1))
