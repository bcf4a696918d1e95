"""Base rates of a pocket model on the pocket test set: solve per tier and family, exploited rate per mode \
(eval markers).

Run: python scripts/pocket_base_rates.py --model gradient_quarantine/pocket_model --samples 8 \
    --out benchmarks/pocket_base_rates/pocket_base_rates_k8.json
With --samples K every prompt is answered K times (generation seeds 12345 .. 12345+K-1) and the rates pool all
K*468 answers.
"""
import argparse, collections, json, time
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
from gradient_quarantine.evaluate import Sampling, evaluate, summarize
from gradient_quarantine.pocket_problems import family_of, pocket_problems
from gradient_quarantine.problems import assign_modes
from gradient_quarantine.rewards import MODES

ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ap.add_argument("--model", required=True); ap.add_argument("--out", required=True)
ap.add_argument("--temperature", type=float, default=1.0); ap.add_argument("--max-new-tokens", type=int, default=160)
ap.add_argument("--samples", type=int, default=1, help="completions per prompt, each with its own generation seed")
ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
a = ap.parse_args()
t0 = time.time()
model = AutoModelForCausalLM.from_pretrained(a.model, dtype=torch.float32).to(a.device).eval()
tok = AutoTokenizer.from_pretrained(a.model)
test = pocket_problems("test")
sampling = Sampling(a.temperature, 1.0, 0, a.max_new_tokens)
runs = {"hint_eval_markers": (assign_modes(test, MODES, 0), True),
        "hint_train_markers": (assign_modes(test, MODES, 0), False),
        "no_hint": ({p.id: "gt_only" for p in test}, True)}
out = {"model": a.model, "temperature": a.temperature, "n_prompts": len(test), "samples_per_prompt": a.samples}
for name, (modes, em) in runs.items():
    records = [rec for k in range(a.samples)
               for rec in evaluate(model, None, tok, test, modes, state="base", sampling=sampling, seed=12345 + k,
                                   batch_size=128, eval_markers=em)["records"]]
    r = summarize(records)
    for by_mode in r["by_mode"].values(): by_mode["exploited"] = round(by_mode["hack"] * by_mode["n"])
    tiers, fams = collections.defaultdict(list), collections.defaultdict(list)
    for rec, p in zip(records, test * a.samples):
        tiers[p.difficulty].append(rec["gt_correct"]); fams[family_of(p)].append(rec["gt_correct"])
    out[name] = {"hack": r["hack"], "solve": r["solve"], "n": r["n"], "by_mode": r["by_mode"],
                 "solve_by_tier": {k: sum(v) / len(v) for k, v in tiers.items()},
                 "solve_by_family": {k: sum(v) / len(v) for k, v in fams.items()}}
    print(name, f"hack {r['hack']:.4f} solve {r['solve']:.3f}",
          {m: (round(x["hack"], 4), round(x["solve"], 3), x["n"]) for m, x in r["by_mode"].items()},
          {k: round(v, 3) for k, v in out[name]["solve_by_tier"].items()}, flush=True)
out["seconds"] = time.time() - t0
json.dump(out, open(a.out, "w"), indent=1)
