"""Plain `generate` against `fast_generate` on this machine's CPU, for the pocket preset's two generation workloads,
side by side.

The pocket model (fp32, knobs attached) generates one update's rollouts (64 train prompts under their loophole hints,
160 new tokens, T = 1) and one evaluation batch (128 test prompts, eval markers, 160 new tokens, T = 1), with the knobs
at zero (as at the start of a run) and moved off zero (as after training). The two generators run in turn, `--rounds`
times over, from the same seed; the table has the median seconds, the ratio and whether the completions were identical.

Run from the repository root: python benchmarks/cpu_generate/cpu_generate.py
(writes cpu_generate.md and .json beside it, or to --out DIR). --smoke: the same with 2 rollouts and 2 evaluation
prompts of 4 new tokens, one round, to a temporary folder.
"""
import argparse, json, os, platform, statistics, sys, time
from pathlib import Path
import torch
from gradient_quarantine.adapter import attach_knobs
from gradient_quarantine.evaluate import Sampling, generate
from gradient_quarantine.fastgen import fast_generate
from gradient_quarantine.problems import assign_modes, render_prompt
from gradient_quarantine.tokens import encode_prompt
from gradient_quarantine.train import load_policy, load_substrate, resolve_config
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from provenance import footer, provenance, results_dir

SMOKE = {"prompts_per_update": 1, "group_size": 2, "max_new_tokens": 4, "eval_batch": 2, "eval_max_new_tokens": 4}

def workloads(cfg, tok, train, test) -> dict:
    "name -> (prompts, sampling, batch size) as the pocket preset's update and evaluation use them."
    tmodes, emodes = assign_modes(train, cfg.modes, cfg.mode_seed), assign_modes(test, cfg.modes, cfg.mode_seed)
    rollouts = [encode_prompt(tok, render_prompt(p, tmodes[p.id])) for p in train[:cfg.prompts_per_update]
                for _ in range(cfg.group_size)]
    evals = [encode_prompt(tok, render_prompt(p, emodes[p.id], eval_markers=True)) for p in test[:cfg.eval_batch]]
    return {f"rollouts ({len(rollouts)} x {cfg.max_new_tokens}, T={cfg.temperature:g})":
                (rollouts, Sampling(cfg.temperature, cfg.top_p, cfg.top_k, cfg.max_new_tokens), cfg.gen_batch),
            f"evaluation ({len(evals)} x {cfg.eval_max_new_tokens}, T={cfg.eval_temperature:g})":
                (evals, Sampling(cfg.eval_temperature, cfg.top_p, cfg.top_k, cfg.eval_max_new_tokens), cfg.eval_batch)}

def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", default=None, help="folder for the results (default: beside this script)")
    ap.add_argument("--smoke", action="store_true", help="2 + 2 prompts, 4 new tokens, one round: checks the script")
    a = ap.parse_args()
    out, record = results_dir(a.out, a.smoke, __file__), provenance()
    if a.smoke: a.rounds = 1
    cfg = resolve_config("pocket", **(SMOKE if a.smoke else {}))
    train, test = load_substrate(cfg)
    model, tok = load_policy(cfg, train)
    knobs = attach_knobs(model, model_id=cfg.model)
    rows = []
    for knob_state in ("zero", "moved"):
        if knob_state == "moved":
            g = torch.Generator().manual_seed(1)
            with torch.no_grad():
                for p in knobs.parameters(): p.normal_(0, 0.05, generator=g)
        for name, (prompts, sampling, batch) in workloads(cfg, tok, train, test).items():
            times, outs = {"plain": [], "fast": []}, {}
            for _ in range(a.rounds):
                for gen_name, fn in (("plain", generate), ("fast", fast_generate)):
                    torch.manual_seed(0); t0 = time.perf_counter()
                    outs[gen_name] = fn(model, tok, prompts, sampling, batch_size=batch)
                    times[gen_name].append(time.perf_counter() - t0)
            plain, fast = statistics.median(times["plain"]), statistics.median(times["fast"])
            same = sum(x == y for x, y in zip(outs["plain"], outs["fast"]))
            rows.append({"workload": name, "knobs": knob_state, "plain_s": round(plain, 2), "fast_s": round(fast, 2),
                         "plain_over_fast": round(plain / fast, 2), "identical_completions": f"{same}/{len(prompts)}",
                         "tokens": sum(map(len, outs["fast"])), "all_times": times})
            print(rows[-1], flush=True)
    meta = {"cpus": os.cpu_count(), "torch_threads": torch.get_num_threads(), "torch": torch.__version__,
            "python": platform.python_version(), "processor": platform.processor() or platform.machine(),
            "rounds": a.rounds}
    lines = [f"# Plain `generate` vs `fast_generate` on CPU (pocket model{', smoke' if a.smoke else ''})", "",
             f"{meta['cpus']} CPUs ({meta['torch_threads']} torch threads), torch {meta['torch']}, "
             f"Python {meta['python']}; median of {a.rounds} rounds, the two generators in turn from the same seed.",
             "",
             "| workload | knobs | plain s | fast s | plain / fast | identical completions |",
             "|---|---|---|---|---|---|",
             *[f"| {r['workload']} | {r['knobs']} | {r['plain_s']} | {r['fast_s']} | {r['plain_over_fast']}x | "
               f"{r['identical_completions']} |" for r in rows],
             "", "- **knobs zero**: `fast_generate` uses the base weights as they are, and gives the same samples "
             "as plain `generate`. **moved**: it merges the knobs into the weights (W + U diag(k) Vh, in fp32), "
             "which rounds differently from the unmerged knob path in the last bits, so a near-tie can sample "
             "differently; the distribution is the same (04e_fastgen's checks).", "", footer(record)]
    out.mkdir(parents=True, exist_ok=True)
    (out/"cpu_generate.md").write_text("\n".join(lines) + "\n")
    (out/"cpu_generate.json").write_text(json.dumps({"provenance": record, "smoke": a.smoke, "rows": rows, **meta},
                                                    indent=1) + "\n")
    print("\n".join(lines))

if __name__ == "__main__": main()
