"""Is the pocket model's GPU training bitwise reproducible? Train it twice from the same seed and compare the weights.

Run from the repository root on a GPU host ([--steps N] [--deterministic] optional):
    python benchmarks/pocket_gpu_determinism/pocket_gpu_determinism.py --out benchmarks/pocket_gpu_determinism/
A short run of the real training loop (`train_lm`, bf16 autocast) on the corpus of one seed; prints a table and saves
pocket_gpu_determinism[_deterministic].json, and pocket_gpu_determinism.md, a table of every such file in --out.
--deterministic calls pocket.deterministic_kernels first, as build_pocket.py --deterministic does.
--smoke: the same on the CPU (no autocast: `train_lm` uses bf16 on CUDA only), one step of 2 sequences, to a temporary
folder; it checks the script, not the GPU's kernels (on CPU the training is checked bit for bit in nbs/08_pocket).
"""
import argparse, json, sys, time
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from provenance import provenance, results_dir

def train_once(recipe, tok, seqs, device: str) -> tuple[dict, float, float]:
    "Weights (on CPU), final loss and seconds of one training from recipe.seed."
    import torch
    from gradient_quarantine.pocket import pocket_model, train_lm
    t0 = time.time()
    model = pocket_model(len(tok), recipe.seed)
    losses = train_lm(model, seqs, tok, recipe, device, log=lambda line: None)
    if device == "cuda": torch.cuda.synchronize()
    return {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}, losses[-1], time.time() - t0

def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=None, help="folder for the results (required, except in a smoke)")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--deterministic", action="store_true")
    ap.add_argument("--smoke", action="store_true", help="one step of 2 sequences on the CPU: checks the script")
    args = ap.parse_args()
    if args.out is None and not args.smoke: ap.error("--out is required (except with --smoke)")
    out, record = results_dir(args.out, args.smoke, __file__), provenance()

    import torch
    from gradient_quarantine.pocket import (CorpusRecipe, TrainRecipe, build_corpus, deterministic_kernels,
                                            encode_corpus, pocket_tokenizer)
    if not args.smoke and not torch.cuda.is_available():
        sys.exit("needs a CUDA GPU (--smoke runs on the CPU): on CPU the training is checked bit for bit in "
                 "nbs/08_pocket")
    device = "cpu" if args.smoke else "cuda"
    if args.deterministic: deterministic_kernels()
    recipe = TrainRecipe(steps=1, batch_size=2) if args.smoke else TrainRecipe(steps=args.steps)
    corpus = build_corpus(CorpusRecipe(seeds=(0,)))
    tok = pocket_tokenizer(corpus)
    seqs = encode_corpus(corpus, tok, recipe.max_len)
    (first, loss1, s1), (second, loss2, s2) = (train_once(recipe, tok, seqs, device) for _ in range(2))
    equal = sum(torch.equal(first[k], second[k]) for k in first)
    max_diff = max((first[k].float() - second[k].float()).abs().max().item() for k in first)
    row = {"device": torch.cuda.get_device_name() if device == "cuda" else "CPU (smoke)", "torch": torch.__version__,
           "deterministic_algorithms": args.deterministic, "steps": recipe.steps, "tensors": len(first),
           "tensors_equal": equal, "max_abs_weight_diff": max_diff, "final_loss": [loss1, loss2], "seconds": [s1, s2]}
    name = "pocket_gpu_determinism" + ("_deterministic" if args.deterministic else "")
    out.mkdir(parents=True, exist_ok=True)
    (out/f"{name}.json").write_text(json.dumps({**row, "provenance": record}, indent=1) + "\n")
    rows = [json.loads(f.read_text()) for f in sorted(out.glob("pocket_gpu_determinism*.json"))]
    table = ("| " + " | ".join(row) + " |\n|" + "---|" * len(row) + "\n"
             + "".join("| " + " | ".join(str(r.get(k, "")) for k in row) + " |\n" for r in rows))
    note = "\n`seconds`: the two trainings in order, in one process; the first includes CUDA's warm-up.\n"
    (out/"pocket_gpu_determinism.md").write_text(f"# {__doc__.splitlines()[0]}\n\n{table}{note}")
    print(table)

if __name__ == "__main__": main()
