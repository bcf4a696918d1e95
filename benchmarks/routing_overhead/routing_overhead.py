"""Backward-pass time with per-rollout and per-token routing vs a plain backward, same batch, a few sizes (CPU here).

Run: python benchmarks/routing_overhead/routing_overhead.py [--out DIR]   (writes routing_overhead.md and .json beside
it, or to DIR); --smoke: the smallest size, one repeat, to a temporary folder.
"""
import argparse, json, os, platform, statistics, sys, time
from pathlib import Path
import torch
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from provenance import footer, provenance, results_dir
from gradient_quarantine.adapter import attach_knobs, tiny_qwen3
from gradient_quarantine.direction import Direction
from gradient_quarantine.route import Band, BandGate, Router

SIZES = [  # (hidden, layers, batch, seq)
    (64, 2, 8, 128), (128, 4, 8, 256), (256, 4, 16, 256)]
SMOKE_SIZES = [(16, 1, 2, 8)]
REPEATS = 5

def timed_backward(model, knobs, ids, adv, router=None):
    for p in knobs.parameters(): p.grad = None
    t0 = time.perf_counter()
    if router is not None: router.set_advantages(adv)
    ctx = knobs.collect(router) if router is not None else torch.enable_grad()
    with ctx:
        logits = model(input_ids=ids).logits
        loss = -(adv[:, None] * logits.log_softmax(-1)[..., 0]).sum()
        t1 = time.perf_counter()
        loss.backward()
    if router is not None: router.apply()
    return time.perf_counter() - t1, t1 - t0

def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=None, help="folder for the results (default: beside this script)")
    ap.add_argument("--smoke", action="store_true", help="the smallest size, one repeat: checks the script in seconds")
    a = ap.parse_args()
    out, record, repeats = results_dir(a.out, a.smoke, __file__), provenance(), 1 if a.smoke else REPEATS
    torch.manual_seed(0); torch.set_num_threads(os.cpu_count())
    rows = []
    for hidden, layers, B, T in SMOKE_SIZES if a.smoke else SIZES:
        model = tiny_qwen3(vocab_size=512, hidden_size=hidden, layers=layers)
        knobs = attach_knobs(model, svd_cache=False)
        ids = torch.randint(0, 512, (B, T)); adv = torch.randn(B)
        v = Direction({n: torch.nn.functional.normalize(torch.randn(1, l.deployed.shape[0]), dim=-1)
                       for n, l in knobs.layers.items()}, "random")
        band = Band({n: -0.05 for n in knobs.names}, {n: 0.05 for n in knobs.names})
        arms = {"plain": lambda: None, "route per-rollout": lambda: Router(knobs, BandGate(v, band), "rollout"),
                "route per-token": lambda: Router(knobs, BandGate(v, band), "token")}
        for arm, make in arms.items(): timed_backward(model, knobs, ids, adv, make())           # warm-up
        times = {arm: [] for arm in arms}
        for _ in range(repeats):   # interleaved, side by side
            for arm, make in arms.items(): times[arm].append(timed_backward(model, knobs, ids, adv, make())[0])
        med = {arm: statistics.median(t) for arm, t in times.items()}
        rows.append({"hidden": hidden, "layers": layers, "batch": B, "seq": T, "knob_params": knobs.n_params(),
                     **{f"{arm} ms": round(1000 * m, 1) for arm, m in med.items()},
                     "per-rollout / plain": round(med["route per-rollout"] / med["plain"], 2),
                     "per-token / plain": round(med["route per-token"] / med["plain"], 2)})
    cols = list(rows[0])
    table = ("| " + " | ".join(cols) + " |\n|" + "---|" * len(cols) + "\n"
             + "\n".join("| " + " | ".join(str(r[c]) for c in cols) + " |" for r in rows))
    text = table + (f"\n\nBackward pass only (forward excluded), median of {repeats} interleaved repeats, "
                    f"{os.cpu_count()} CPUs, torch {torch.__version__}, Python {platform.python_version()}.\n\n"
                    f"{footer(record)}\n")
    print(text)
    out.mkdir(parents=True, exist_ok=True)
    (out/"routing_overhead.md").write_text(f"# Routing overhead (CPU{', smoke' if a.smoke else ''})\n\n" + text)
    (out/"routing_overhead.json").write_text(json.dumps(
        {"provenance": record, "smoke": a.smoke, "rows": rows, "cpus": os.cpu_count(), "torch": torch.__version__},
        indent=1) + "\n")

if __name__ == "__main__": main()
