"""How far the knob paths' per-rollout gradients in bf16 lie from fp32: one learning micro-batch of random rollouts
(the trainer's step, a gradient sink on, as route2b's router), each rollout's knob gradient per layer on the separate
and the merged knob path, in bf16 and in fp32, on the same weights (the bf16 model is the fp32 one rounded). A bar on
how far two bf16 paths may differ means something only beside how far either lies from fp32.

`learn_step.py` runs the same measurement on the full Qwen3-4B configuration on a GPU. This script runs it on a model of
Qwen3-4B's layer sizes with fewer layers, a smaller vocabulary and shorter rollouts, on the CPU (minutes on 2 cores):
    PYTHONPATH=$PWD python benchmarks/learn_step/precision.py --out benchmarks/learn_step/
Writes precision.json and precision.md to --out. --smoke: a tiny Qwen3, rollouts of 24 + 8 tokens, to a temporary
folder.
"""
import argparse, json, statistics, sys, time
from pathlib import Path
import torch
sys.path[:0] = [str(Path(__file__).resolve().parents[1]/"gpu"), str(Path(__file__).resolve().parents[1]),
                str(Path(__file__).resolve().parent)]
import gpu
from provenance import footer, provenance, results_dir
from learn_step import batches, precision_lines, step
from gradient_quarantine.adapter import GradCapture
from gradient_quarantine.tokens import token_logprobs

def rollout_grads(model, b, merged: bool) -> dict:
    "Each rollout's knob gradient (B, r) per layer from one step of `b`, on the merged or the separate knob path."
    knobs, capture = model._knobs, GradCapture("rollout")
    with knobs.merged(merged), knobs.collect(capture): step(model, knobs, b, token_logprobs)
    return capture.grads

def precision(arch: dict, dev, b) -> dict:
    ("How far each knob path's per-rollout gradients in bf16 lie from the separate path's in fp32, on the same "
     "weights (the fp32 model rounded to bf16, its knobs kept in fp32 as training keeps them), and how far the two "
     "bf16 paths lie from each other: the largest relative difference over the layers, and the median. One model at "
     "a time, so that the full configuration fits one GPU.")
    model = gpu.build(arch, torch.float32, dev, knobs=True)
    knobs = model._knobs
    ref, ref_merged = rollout_grads(model, b, False), rollout_grads(model, b, True)
    knobs.release_merged()
    with torch.no_grad():                            # weights and bases rounded as a bf16 build has them: the knobs and
        for n, p in model.named_parameters():       # RoPE's frequencies stay in fp32
            if not n.endswith((".deployed", ".quarantine")): p.data = p.data.to(torch.bfloat16)
        for m in knobs.layers.values(): m.U, m.Vh = m.U.to(torch.bfloat16), m.Vh.to(torch.bfloat16)
    separate, merged = rollout_grads(model, b, False), rollout_grads(model, b, True)
    def apart(x, y) -> dict:
        d = [((x[n].float() - y[n].float()).norm() / y[n].float().norm()).item() for n in y]
        return {"max": float(f"{max(d):.3g}"), "median": float(f"{statistics.median(d):.3g}")}
    return {"layers": len(ref), "fp32 merged vs fp32 separate": apart(ref_merged, ref),
            "bf16 separate vs fp32": apart(separate, ref), "bf16 merged vs fp32": apart(merged, ref),
            "bf16 merged vs bf16 separate": apart(merged, separate)}

def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=None, help="folder for the results (default: beside this script)")
    ap.add_argument("--layers", type=int, default=4, help="decoder layers of Qwen3-4B's sizes")
    ap.add_argument("--vocab", type=int, default=2048, help="vocabulary (the pocket tokenizer's size)")
    ap.add_argument("--prompt", type=int, default=128); ap.add_argument("--completion", type=int, default=384)
    ap.add_argument("--rows", type=int, default=2, help="rollouts in the micro-batch")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--smoke", action="store_true", help="a tiny Qwen3 and rollouts of 24 + 8 tokens")
    a = ap.parse_args()
    out, dev, t0 = results_dir(a.out, a.smoke, __file__), torch.device(a.device), time.perf_counter()
    arch = gpu.TINY if a.smoke else {**gpu.QWEN3_4B, "num_hidden_layers": a.layers, "vocab_size": a.vocab}
    prompt, completion = (24, 8) if a.smoke else (a.prompt, a.completion)
    b = batches(arch["vocab_size"], a.rows, prompt, completion, 1)[0].to(dev)
    result = precision(arch, dev, b)
    report = {"provenance": provenance(), "smoke": a.smoke, "device": str(dev), "arch": arch, "rows": a.rows,
              "prompt": prompt, "completion": completion, "precision": result,
              "seconds": round(time.perf_counter() - t0, 1)}
    out.mkdir(parents=True, exist_ok=True)
    (out/"precision.json").write_text(json.dumps(report, indent=1) + "\n")
    model = "A tiny Qwen3" if a.smoke else "A random Qwen3 of Qwen3-4B's layer sizes"
    lines = [f"# The knob paths in bf16 against fp32 ({dev.type.upper()})", "",
             f"{model} with {arch['num_hidden_layers']} layers and a vocabulary of "
             f"{arch['vocab_size']:,} (`gpu.build`: random knob bases, knobs drawn at 0.02), {a.rows} rollouts of "
             f"{prompt} + {completion} random tokens; the trainer's step (knobs-off reference forward, policy forward, "
             "token loss and its backward).", *precision_lines(result),
             f"{report['seconds']:.0f} s in all.", "", footer(report["provenance"])]
    (out/"precision.md").write_text("\n".join(lines) + "\n")
    print((out/"precision.md").read_text(), flush=True)

if __name__ == "__main__": main()
