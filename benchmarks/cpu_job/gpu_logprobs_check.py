"""Whether `TargetLogprobs`' backward (softmax only on the rows with a gradient) gives the whole-row backward's numbers
bit for bit on a GPU too, at the full preset's shapes (Qwen3-4B: d = 2560, V = 151,936; a micro-batch of two rollouts of
587 + 1536 tokens, about 70% of them completion tokens) and at the pocket's (d = 256, V = 2048, 32 rollouts of 334).

The whole-row backward is the one `TargetLogprobs` had before (softmax, e_y - p and the scaling over all (n, V) logits
of a chunk). Each case runs the whole-row backward twice (is it repeatable at all?) and the new one once, and compares.

Run from the repository root on a CUDA machine: python benchmarks/cpu_job/gpu_logprobs_check.py [--out DIR]
(writes gpu_logprobs_check.json). --smoke: the same comparison on the CPU at tiny shapes (a chunk of 8 rows, so that
several chunks run), to a temporary folder; on a CPU it checks the script, not the GPU's kernels.
"""
import argparse, json, sys, time
from pathlib import Path
import torch
from gradient_quarantine.tokens import LOGIT_CHUNK_BYTES, TargetLogprobs
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from provenance import provenance, results_dir

CASES = [  # name, rows, d, V, share of rows with a gradient, dtype
    ("full preset micro-batch", 2 * 2123, 2560, 151936, 0.7, torch.bfloat16),
    ("full preset micro-batch, fp32", 2 * 2123, 2560, 151936, 0.7, torch.float32),
    ("pocket micro-batch", 32 * 333, 256, 2048, 0.25, torch.float32),
    ("pocket micro-batch, bf16", 32 * 333, 256, 2048, 0.25, torch.bfloat16)]
SMOKE_CASES = [("tiny", 20, 16, 64, 0.5, torch.float32), ("tiny, bf16", 20, 16, 64, 0.5, torch.bfloat16)]

def sync(device):
    if torch.device(device).type == "cuda": torch.cuda.synchronize()

def whole_row_backward(h, weight, targets, grad, rows):
    "d loss / d h as TargetLogprobs computed it before: every row of every chunk through the softmax."
    dh = torch.empty_like(h)
    for s in range(0, h.shape[0], rows):
        hs, ys = h[s:s + rows], targets[s:s + rows, None]
        dz = (hs @ weight.T).float().softmax(1).neg_()
        dz.scatter_add_(1, ys, torch.ones(ys.shape, dtype=dz.dtype, device=dz.device))
        dz = (dz * grad[s:s + rows, None]).to(h.dtype)
        dh[s:s + rows] = dz @ weight
    return dh

def case(name, n, d, V, live_share, dtype, device, rows=None, seed=0):
    g = torch.Generator(device=device).manual_seed(seed)
    h = (torch.randn(n, d, generator=g, device=device) * 0.5).to(dtype)
    w = (torch.randn(V, d, generator=g, device=device) * 0.02).to(dtype)
    y = torch.randint(0, V, (n,), generator=g, device=device)
    grad = torch.randn(n, generator=g, device=device) * (torch.rand(n, generator=g, device=device) < live_share)
    rows = rows or max(1, LOGIT_CHUNK_BYTES // (4 * V))
    old = [whole_row_backward(h, w, y, grad, rows) for _ in range(2)]
    hh = h.clone().requires_grad_()
    sync(device); t0 = time.perf_counter()
    (TargetLogprobs.apply(hh, w, y, rows) * grad).sum().backward()
    sync(device); t_new = time.perf_counter() - t0
    return {"case": name, "dtype": str(dtype), "rows": n, "d": d, "V": V, "chunk_rows": rows, "live_share": live_share,
            "whole_row_repeats": torch.equal(old[0], old[1]), "new_equals_whole_row": torch.equal(hh.grad, old[0]),
            "max_abs_diff": (hh.grad.float() - old[0].float()).abs().max().item(), "new_forward_backward_s": t_new}

def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=None, help="folder for gpu_logprobs_check.json (default: beside this script)")
    p.add_argument("--smoke", action="store_true", help="tiny shapes on the CPU, to a temporary folder")
    args = p.parse_args()
    folder, record = results_dir(args.out, args.smoke, __file__), provenance()
    if not args.smoke and not torch.cuda.is_available(): sys.exit("needs a CUDA GPU (--smoke runs on the CPU)")
    dev = "cpu" if args.smoke else "cuda"
    cases = [case(*c, dev, rows=8) for c in SMOKE_CASES] if args.smoke else [case(*c, dev) for c in CASES]
    out = {"provenance": record, "smoke": args.smoke, "device": dev, "torch": torch.__version__, "cases": cases,
           "all_equal": all(c["new_equals_whole_row"] for c in cases)}
    folder.mkdir(parents=True, exist_ok=True)
    (folder/"gpu_logprobs_check.json").write_text(json.dumps(out, indent=1) + "\n")
    print("| case | dtype | rows | d | V | whole-row backward repeats | new equals whole-row | max abs diff |")
    print("|---|---|---|---|---|---|---|---|")
    for c in cases:
        print(f"| {c['case']} | {c['dtype']} | {c['rows']} | {c['d']} | {c['V']} | {c['whole_row_repeats']} | "
              f"{c['new_equals_whole_row']} | {c['max_abs_diff']:.3g} |")
    if not out["all_equal"]: sys.exit("the new backward differs from the whole-row one")

if __name__ == "__main__": main()
