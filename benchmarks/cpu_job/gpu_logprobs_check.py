"""Whether `TargetLogprobs`' backward (softmax only on the rows with a gradient) gives the whole-row backward's numbers
bit for bit on a GPU too, at the full preset's shapes (Qwen3-4B: d = 2560, V = 151,936; a micro-batch of two rollouts of
587 + 1536 tokens, about 70% of them completion tokens) and at the pocket's (d = 256, V = 2048, 32 rollouts of 334).

The whole-row backward is the one `TargetLogprobs` had before (softmax, e_y - p and the scaling over all (n, V) logits
of a chunk). Each case runs the whole-row backward twice (is it repeatable at all?) and the new one once, and compares.

Run from the repository root on a CUDA machine: python benchmarks/cpu_job/gpu_logprobs_check.py [--out DIR]
(writes gpu_logprobs_check.json)
"""
import argparse, json, time
from pathlib import Path
import torch
from gradient_quarantine.tokens import LOGIT_CHUNK_BYTES, TargetLogprobs

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

def case(name, n, d, V, live_share, dtype, device, seed=0):
    g = torch.Generator(device=device).manual_seed(seed)
    h = (torch.randn(n, d, generator=g, device=device) * 0.5).to(dtype)
    w = (torch.randn(V, d, generator=g, device=device) * 0.02).to(dtype)
    y = torch.randint(0, V, (n,), generator=g, device=device)
    grad = torch.randn(n, generator=g, device=device) * (torch.rand(n, generator=g, device=device) < live_share)
    rows = max(1, LOGIT_CHUNK_BYTES // (4 * V))
    old = [whole_row_backward(h, w, y, grad, rows) for _ in range(2)]
    hh = h.clone().requires_grad_()
    torch.cuda.synchronize(); t0 = time.perf_counter()
    (TargetLogprobs.apply(hh, w, y, rows) * grad).sum().backward()
    torch.cuda.synchronize(); t_new = time.perf_counter() - t0
    return {"case": name, "dtype": str(dtype), "rows": n, "d": d, "V": V, "live_share": live_share,
            "whole_row_repeats": torch.equal(old[0], old[1]), "new_equals_whole_row": torch.equal(hh.grad, old[0]),
            "max_abs_diff": (hh.grad.float() - old[0].float()).abs().max().item(), "new_forward_backward_s": t_new}

def main():
    p = argparse.ArgumentParser(); p.add_argument("--out", default=str(Path(__file__).parent)); args = p.parse_args()
    dev = "cuda"
    out = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "cases": [
        case("full preset micro-batch", 2 * 2123, 2560, 151936, 0.7, torch.bfloat16, dev),
        case("full preset micro-batch, fp32", 2 * 2123, 2560, 151936, 0.7, torch.float32, dev),
        case("pocket micro-batch", 32 * 333, 256, 2048, 0.25, torch.float32, dev),
        case("pocket micro-batch, bf16", 32 * 333, 256, 2048, 0.25, torch.bfloat16, dev)]}
    out["all_equal"] = all(c["new_equals_whole_row"] for c in out["cases"])
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out)/"gpu_logprobs_check.json").write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps(out, indent=1))

if __name__ == "__main__": main()
