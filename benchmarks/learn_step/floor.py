"""The learning step's compute floor: the matrix products one full-preset update's loss and backward must run, counted
pass by pass from the model's shapes, and the seconds they take at a given multiply rate.

The count follows what `Trainer.learn` runs on each micro-batch (`benchmarks/learn_step/learn_step.py`'s `step`):
- the knobs-off reference forward (no grad): every base linear, the LM head, attention;
- the policy forward: every base linear plus its knob path, `x Vh^T` then `U^T`, full rank (r = min(d_in, d_out)),
  the LM head, attention;
- the backward, input gradients only (the base weights are frozen): through each base linear and both knob
  projections (`U^T dy` is also what the per-token knob gradients need), except the first layer's q, k and v, whose
  input (the normed embedding) needs no gradient; the LM head's chunked log-probabilities recompute their logits and
  multiply back; attention as FlashAttention's backward runs it (the scores recomputed, then four products).
Attention is causal, so a fused kernel skips half of each square; the linears' count is exact and is checked against
`torch.utils.flop_counter` on the trainer's own step (`check`), attention is counted from its shapes.

From the repository root (seconds, CPU only; `--measure` on a GPU host times bf16 products of 8192 x 8192 and uses
that rate instead of `--tflops`):
    PYTHONPATH=$PWD python benchmarks/learn_step/floor.py --out benchmarks/learn_step/
Writes floor.json and floor.md to --out. --smoke checks the count against the flop counter on a tiny Qwen3 (one
micro-batch of 2 rollouts of 24 + 8 tokens) and prints the table, to a temporary folder.
"""
import argparse, json, sys, time
from pathlib import Path
import torch
from torch.utils.flop_counter import FlopCounterMode
sys.path[:0] = [str(Path(__file__).resolve().parents[1]/"gpu"), str(Path(__file__).resolve().parents[1]),
                str(Path(__file__).resolve().parent)]
import gpu
from provenance import footer, provenance, results_dir
from learn_step import batches, step
from gradient_quarantine.tokens import token_logprobs

BASELINE = Path(__file__).resolve().parents[1]/"gpu_update"/"h200_baseline.json"   # the measured update beside it

def linear_shapes(cfg: dict) -> list[tuple[str, int, int]]:
    "(name, d_in, d_out) of one decoder layer's seven knob matrices."
    d, hd, i = cfg["hidden_size"], cfg["head_dim"], cfg["intermediate_size"]
    q, kv = cfg["num_attention_heads"] * hd, cfg["num_key_value_heads"] * hd
    return [("q", d, q), ("k", d, kv), ("v", d, kv), ("o", q, d), ("gate", d, i), ("up", d, i), ("down", i, d)]

def linear_macs(cfg: dict, tokens: int, head_rows: int, merged: bool = False) -> dict[str, int]:
    ("Multiply-adds of the linears and the LM head per pass, for `tokens` positions of which `head_rows` get a "
     "log-probability (each row's last position has no next token), on the separate or the merged knob path; "
     "`merge`: building the merged matrices, once an update.")
    base = forward = backward = skip = merge = 0
    for name, d_in, d_out in linear_shapes(cfg):
        r = min(d_in, d_out)
        base += d_in * d_out; merge += r * d_in * d_out if merged else 0
        forward += d_in * d_out + r * d_in + (0 if merged else r * d_out)          # W x (or W' x), Vh x, U (k h)
        backward += d_in * d_out + r * d_out + (0 if merged else r * d_in)         # dy W (or W'), dy U, (k delta) Vh
        if name in ("q", "k", "v"): skip += d_in * d_out + (0 if merged else r * d_in)   # layer 0: no gradient into
    layers, head = cfg["num_hidden_layers"], cfg["hidden_size"] * cfg["vocab_size"] * head_rows    # the embedding
    return {"reference": layers * base * tokens + head, "policy": layers * forward * tokens + head,
            "backward": (layers * backward - skip) * tokens + 2 * head, "merge": layers * merge,
            "knob_share": (forward - base) / forward}

def attention_macs(cfg: dict, lengths: list[int]) -> dict[str, int]:
    ("Multiply-adds of causal attention per pass over sequences of these lengths: two products of (L x hd) by "
     "(hd x L) a head forward, five backward, half of each square.")
    square = cfg["num_hidden_layers"] * cfg["num_attention_heads"] * cfg["head_dim"] * sum(n * n for n in lengths) // 2
    return {"reference": 2 * square, "policy": 2 * square, "backward": 5 * square, "merge": 0}

PASSES = ("reference", "policy", "backward", "merge")

def check(cfg: dict = gpu.TINY, merged: bool = False) -> dict:
    ("The flop counter's count of one micro-batch of the trainer's step on a tiny fp32 Qwen3 on the CPU, beside "
     "`linear_macs`'s (attention on the CPU runs in a kernel the counter does not see).")
    model = gpu.build(cfg, torch.float32, torch.device("cpu"), knobs=True)
    b = batches(cfg["vocab_size"], 2, 24, 8, 1)[0]
    with FlopCounterMode(display=False) as counter, model._knobs.merged(merged):
        step(model, model._knobs, b, token_logprobs)
    rows, length = b.input_ids.shape
    ours = linear_macs(cfg, rows * length, rows * (length - 1), merged)
    return {"merged": merged, "flop_counter": counter.get_total_flops(), "counted": 2 * sum(ours[p] for p in PASSES),
            "ops": sorted(str(op) for op in counter.get_flop_counts()["Global"])}

def measured_tflops(n: int = 8192, repeats: int = 20) -> float:
    "The GPU's rate on bf16 products of n x n by n x n."
    a, b = (torch.randn(n, n, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    for _ in range(3): a @ b
    torch.cuda.synchronize(); t0 = time.perf_counter()
    for _ in range(repeats): a @ b
    torch.cuda.synchronize()
    return 2 * n ** 3 * repeats / (time.perf_counter() - t0) / 1e12

def floor(cfg: dict, rollouts: int, prompt: int, completion: int, tflops: float, merged: bool) -> dict:
    "One update's loss-and-backward arithmetic by pass (FLOP) and its seconds at `tflops`, on one knob path."
    length = prompt + completion
    lin = linear_macs(cfg, rollouts * length, rollouts * (length - 1), merged)
    att = attention_macs(cfg, [length] * rollouts)
    flop = {p: 2 * (lin[p] + att[p]) for p in PASSES}
    return {"tokens": rollouts * length, "flop": flop, "attention_flop": {p: 2 * att[p] for p in PASSES},
            "knob_share": round(lin["knob_share"], 4), "tflops": tflops,
            "seconds": {p: round(f / tflops / 1e12, 2) for p, f in flop.items()},
            "total_s": round(sum(flop.values()) / tflops / 1e12, 2)}

def write(out: Path, report: dict):
    out.mkdir(parents=True, exist_ok=True)
    (out/"floor.json").write_text(json.dumps(report, indent=1) + "\n")
    paths, e = report["floor"], report["env"]
    f = paths["separate"]
    names = {"reference": "reference forward (knobs off)", "policy": "policy forward", "backward": "backward",
             "merge": "merged matrices, built once"}
    rate = (f"{f['tflops']:.0f} TFLOP/s, measured here on bf16 products of 8192 x 8192" if e["measured_rate"] else
            f"{f['tflops']:.0f} TFLOP/s (`--tflops`: the bf16 rate that `benchmarks/README.md` gives for one H200; "
            "`--measure` times it on a GPU)")
    cell = lambda g, p: f"{g['flop'][p] / 1e15:.2f} PFLOP, {g['seconds'][p]} s"
    lines = [f"# The learning step's compute floor ({e['model']})", "",
             f"One update: {e['rollouts']} rollouts of {e['prompt']} + {e['completion']} tokens (the mean prompt and "
             f"completion of `{e['baseline']}`), {f['tokens']:,} tokens, no padding; at {rate}:", "",
             "| pass | of which attention | separate knob path | merged knob path |", "|---|---|---|---|",
             *[f"| {names[p]} | {f['attention_flop'][p] / 1e15:.2f} PFLOP | {cell(f, p)} | "
               f"{cell(paths['merged'], p)} |" for p in PASSES],
             "| **loss and backward** | | " + " | ".join(
                 f"{sum(g['flop'].values()) / 1e15:.2f} PFLOP, **{g['total_s']} s**" for g in paths.values()) + " |",
             "",
             f"- On the separate path the knob projections are {f['knob_share']:.0%} of the policy forward's linear "
             "products: the knobs use the full SVD basis (r = min(d_in, d_out)), so each knob layer's extra path costs "
             "more than its base matrix. The merged path (`knob_path=\"merged\"`) keeps the two projections the knob "
             "gradients need and drops the other two.",
             *([f"- Measured: loss and backward {e['measured_s']} s for vanilla on the separate path in "
                f"`{e['baseline']}`, {e['measured_s'] / f['total_s']:.2f} times its floor."]
               if e.get("measured_s") else []),
             f"- The linears' count equals `torch.utils.flop_counter`'s on the trainer's own step, on both paths and "
             f"{len(CHECKED)} tiny Qwen3 configurations "
             f"({', '.join(str(c['counted']) for c in report['checks'])} FLOP); attention is counted from its shapes "
             "(causal: half of each square; the backward as FlashAttention runs it, five products), with every "
             "rollout at the mean length, which Jensen's inequality makes a lower bound.", "",
             footer(report["provenance"])]
    (out/"floor.md").write_text("\n".join(lines) + "\n")

# two shapes of the trainer's own model: the test model, and one with other head counts, widths and depth
CHECKED = [gpu.TINY, {**gpu.TINY, "num_hidden_layers": 3, "num_attention_heads": 2, "num_key_value_heads": 1,
                      "intermediate_size": 80, "vocab_size": 768}]

def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=None, help="folder for the results (default: beside this script)")
    ap.add_argument("--tflops", type=float, default=790.0, help="the multiply rate the floor is taken at")
    ap.add_argument("--measure", action="store_true", help="time bf16 products on this host's GPU for the rate")
    ap.add_argument("--rollouts", type=int, default=256, help="rollouts an update (the full preset's 64 x 4)")
    ap.add_argument("--smoke", action="store_true", help="the flop-counter checks and the table, to a temp folder")
    a = ap.parse_args()
    out = results_dir(a.out, a.smoke, __file__)
    checks = [check(cfg, merged) for cfg in CHECKED for merged in (False, True)]
    for c in checks:
        if c["flop_counter"] != c["counted"] or not set(c["ops"]) <= {"aten.mm", "aten.addmm"}:
            sys.exit(f"floor: the count disagrees with the flop counter: {c}")
    baseline = json.loads(BASELINE.read_text())
    vanilla = next(r for r in baseline["arms"] if r["arm"] == "vanilla")
    env = {"model": "Qwen3-4B configuration", "rollouts": a.rollouts, "prompt": baseline["env"]["prompt_mean"],
           "completion": baseline["generation"]["completion_mean"], "baseline": str(BASELINE.relative_to(
               BASELINE.parents[2])), "measured_s": vanilla["s_backward"], "measured_rate": a.measure}
    tflops = measured_tflops() if a.measure else a.tflops
    report = {"provenance": provenance(), "smoke": a.smoke, "env": env, "checks": checks,
              "floor": {path: floor(gpu.QWEN3_4B, a.rollouts, env["prompt"], env["completion"], tflops,
                                    merged=path == "merged") for path in ("separate", "merged")}}
    write(out, report)
    print((out/"floor.md").read_text(), flush=True)

if __name__ == "__main__": main()
