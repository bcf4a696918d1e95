"""One learning micro-batch of the full preset on one GPU (random Qwen3-4B with knobs, bf16), side by side in one run:
the forward with an explicit padding mask (as `token_logprobs` had it) against the causal-only forward it has now, on
sequence lengths seen before and on fresh ones, HF's RMSNorm ops against `fuse_rms_norms`, and the separate knob path
against the merged one (`knob_path="merged"`). Then the precision of both knob paths in bf16: each rollout's knob
gradient of one micro-batch against the separate path's in fp32 on the same weights, and the two bf16 paths apart.

A micro-batch is what `Trainer.learn` runs per step: the knobs-off reference forward (no grad), the policy forward and
the backward of the token loss (vanilla). Its rollouts are random ids, prompt 587 + completion 1536 tokens,
right-padded: the rows of a micro-batch differ in length, as real rollouts do, and every micro-batch has a length no
earlier one had, as in training.
On the GPU machine, from the repository root (about 2 minutes):
    export PYTHONPATH=$PWD; python benchmarks/learn_step/learn_step.py --out benchmarks/learn_step/
Writes learn_step.json and learn_step.md to --out (default: beside this script). --smoke checks the script on the CPU
in seconds: a tiny Qwen3 of the same architecture, rollouts of 24 + 8 tokens, one micro-batch per row, one round, to a
temporary folder; its `peak GiB` column is empty (CUDA's allocator statistics).
"""
import argparse, json, platform, statistics, sys, time
from pathlib import Path
import torch
import transformers
sys.path[:0] = [str(Path(__file__).resolve().parents[1]/"gpu"), str(Path(__file__).resolve().parents[1])]
import gpu
from provenance import footer, provenance, results_dir
from gradient_quarantine.fastgen import fuse_rms_norms
from gradient_quarantine.tokens import make_batch, token_logprobs
from gradient_quarantine.train import grpo_token_loss

def batches(vocab: int, rows: int, prompt: int, comp: int, steps: int, first: int = 0) -> list:
    "`steps` micro-batches of `rows` right-padded rollouts; micro-batch s has lengths no other one has."
    g = torch.Generator().manual_seed(first)
    lens = [[(prompt - s - 5 * i, comp - 2 * i) for i in range(rows)] for s in range(first, first + steps)]
    return [make_batch([torch.randint(3, vocab, (p,), generator=g).tolist() for p, _ in ls],
                       [torch.randint(3, vocab, (c,), generator=g).tolist() for _, c in ls], 0) for ls in lens]

def masked_logprobs(model, b):
    "token_logprobs as it was: the padding mask passed to the model."
    logits = model(input_ids=b.input_ids, attention_mask=b.attention_mask).logits.float()
    lp = logits[:, :-1].log_softmax(-1).gather(-1, b.input_ids[:, 1:, None])[..., 0]
    return torch.cat([torch.zeros_like(lp[:, :1]), lp], 1)

def step(model, knobs, b, logprobs):
    "What Trainer.learn does for one micro-batch (vanilla): reference forward, policy forward, loss, backward."
    mask = b.completion_mask.float()
    with torch.no_grad(), knobs.off(): ref = logprobs(model, b)
    lp = logprobs(model, b)
    tl, _ = grpo_token_loss(lp, lp.detach(), ref, torch.ones(mask.shape[0], device=mask.device), mask, kl_beta=1e-3)
    (tl.sum() / 1e4).backward()

def time_steps(model, knobs, bs, logprobs, dev) -> dict:
    ("Seconds per micro-batch over `bs` (after one warm-up micro-batch of a length none of them has), "
     "and the peak memory.")
    gpu.free_memory(dev)
    step(model, knobs, batches(model.config.vocab_size, 2, 16, 16, 1)[0].to(dev), logprobs); gpu.sync(dev)
    t0 = time.perf_counter()
    for b in bs: step(model, knobs, b, logprobs)
    gpu.sync(dev)
    for p in knobs.parameters(): p.grad = None
    return {"s_per_batch": round((time.perf_counter() - t0) / len(bs), 3), "peak_gib": gpu.peak_gib(dev)}

ROWS = [("masked, fresh lengths", "masked", "fresh"), ("masked, lengths seen before", "masked", "seen"),
        ("causal, fresh lengths", "causal", "fresh"), ("causal, fused norms, fresh lengths", "fused", "fresh"),
        ("causal, fused norms, merged knobs, fresh lengths", "merged", "fresh")]

def precision_lines(p: dict | None) -> list[str]:
    "The precision section of the markdown, once it is measured."
    if p is None: return []
    return ["", f"Per-rollout knob gradients of one micro-batch (sink on, vanilla's loss), {p['layers']} layers, the "
            "relative difference per layer:", "", "| paths | largest | median |", "|---|---|---|",
            *[f"| {k} | {v['max']} | {v['median']} |" for k, v in p.items() if k != "layers"], ""]

def write(out: Path, report: dict):
    out.mkdir(parents=True, exist_ok=True)
    (out/"learn_step.json").write_text(json.dumps(report, indent=1) + "\n")
    e, rows = report["env"], report["rows"]
    med = {name: statistics.median(r["s_per_batch"] for r in rows if r["name"] == name) for name, _, _ in ROWS
           if any(r["name"] == name for r in rows)}
    lines = [f"# One learning micro-batch on {e['device']}", "",
             f"Random Qwen3-4B configuration (bf16, knobs attached and moved off zero), {e['rows']} rollouts of prompt "
             f"{e['prompt']} + completion {e['completion']} tokens (right-padded; the rows differ in length), "
             f"{e['steps']} micro-batches per row of the table: the knobs-off "
             "reference forward, the policy forward and the backward of the token loss (vanilla).", "",
             f"The rows are timed in turn, {e['rounds']} rounds; the median over the rounds:", "",
             "| forward | median seconds per micro-batch | vs masked, fresh lengths |", "|---|---|---|",
             *[f"| {n} | {v:.3f} | {v / next(iter(med.values())):.2f}x |" for n, v in med.items()], "",
             "| round | forward | seconds per micro-batch | peak GiB |", "|---|---|---|---|",
             *[f"| {r['round']} | {r['name']} | {r['s_per_batch']} | {'' if r['peak_gib'] is None else r['peak_gib']} |"
               for r in rows], "",
             "- **masked**: the padding mask passed to the model, as `token_logprobs` did; SDPA then takes a backend "
             "that builds a plan for every new sequence length. **causal**: no mask (`token_logprobs` now): "
             "right padding makes the causal mask alone exact.",
             "- **fresh lengths**: every micro-batch has a length none before it had, as in training; "
             "**seen**: the same micro-batches again.",
             "- **fused norms**: `fuse_rms_norms`, which the trainer applies on CUDA.",
             "- **merged knobs**: `knob_path=\"merged\"`, each knob layer through W' = W + U diag(k) Vh (four "
             "products a layer per forward and backward instead of six).",
             *precision_lines(report.get("precision")),
             *(["- **peak GiB**: empty on the CPU (CUDA's allocator statistics)."] if e["device"].startswith("CPU")
               else []),
             f"- torch {e['torch']}, transformers {e['transformers']}, Python {e['python']}; "
             f"{report.get('seconds', 0):.0f} s in all.", "", footer(report["provenance"])]
    (out/"learn_step.md").write_text("\n".join(lines) + "\n")

def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=None, help="folder for the results (default: beside this script)")
    ap.add_argument("--steps", type=int, default=8, help="micro-batches per row of the table")
    ap.add_argument("--rounds", type=int, default=3, help="the table's rows are timed in turn, this many times over")
    ap.add_argument("--smoke", action="store_true", help="a tiny fp32 model on CPU, short rollouts: checks the script")
    a = ap.parse_args()
    out = results_dir(a.out, a.smoke, __file__)
    if a.smoke: a.steps, a.rounds = 1, 1
    dev = torch.device("cpu" if a.smoke else "cuda")
    arch = gpu.TINY if a.smoke else gpu.QWEN3_4B
    model = gpu.build(arch, torch.float32 if a.smoke else torch.bfloat16, dev, knobs=True)
    knobs, shape = model._knobs, ((24, 8) if a.smoke else (587, 1536))
    report = {"provenance": provenance(), "smoke": a.smoke,
              "env": {"device": torch.cuda.get_device_name(dev) if dev.type == "cuda" else "CPU (smoke)",
                      "torch": torch.__version__, "transformers": transformers.__version__,
                      "python": platform.python_version(), "rows": 2, "prompt": shape[0],
                      "completion": shape[1], "steps": a.steps, "rounds": a.rounds}, "rows": []}
    bs, i = None, 0
    for rnd in range(a.rounds):
        for name, forward, lengths in ROWS:
            if lengths == "fresh":
                bs = [b.to(dev) for b in batches(model.config.vocab_size, 2, *shape, a.steps, first=i * a.steps)]
            i += 1
            if forward in ("fused", "merged"): fuse_rms_norms(model)
            with knobs.merged(forward == "merged"):
                r = {"name": name, "round": rnd + 1,
                     **time_steps(model, knobs, bs, masked_logprobs if forward == "masked" else token_logprobs, dev)}
            for m in model.modules(): m.__dict__.pop("forward", None)          # the norms back to HF's ops
            knobs.release_merged()                                              # the merged matrices' memory too
            report["rows"].append(r); gpu.log(r)
            write(out, {**report, "seconds": time.perf_counter() - gpu.T0})
    from precision import precision              # it imports this module's step
    b = bs[0]; del model, knobs, bs; gpu.free_memory(dev)
    report["precision"] = precision(arch, dev, b)
    write(out, {**report, "seconds": time.perf_counter() - gpu.T0})
    print((out/"learn_step.md").read_text(), flush=True)

if __name__ == "__main__": main()
