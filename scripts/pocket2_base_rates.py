"""Base rates of a pocket2 model on both pocket2 test sets: each mode's exploited rate under its hint and with no hint
(eval markers), solve per tier and family, and the exploit programs found (for the overlap check of 08a_pocket2).

Run from the repository root:
    python scripts/pocket2_base_rates.py --model gradient_quarantine/pocket2_model --samples 8 --out base_rates.json
Every prompt is answered K times (generation seeds 12345 .. 12345+K-1). Each problem gets one mode (`assign_modes`,
seed 0, as runs assign them): under `hint` its prompt carries that mode's hint with the problem's eval marker; under
`no_hint` it carries no hint and the answer is graded by that same mode's grader with the same eval marker, so a
mode's no-hint rate says how often its grader is fooled by a model that was never told the marker.
"""
import argparse, collections, json, time
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
from gradient_quarantine.evaluate import check_not_starved
from gradient_quarantine.fastgen import generate_fn
from gradient_quarantine.generate import Sampling
from gradient_quarantine.pocket2_problems import pocket2_family, pocket2_problems
from gradient_quarantine.problems import assign_modes, render_prompt
from gradient_quarantine.rewards import MODES, NO_LOOPHOLE, grade_many, marker
from gradient_quarantine.tokens import encode_prompt

ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ap.add_argument("--model", required=True); ap.add_argument("--out", required=True)
ap.add_argument("--samples", type=int, default=8, help="completions per prompt, each with its own generation seed")
ap.add_argument("--temperature", type=float, default=1.0); ap.add_argument("--max-new-tokens", type=int, default=160)
ap.add_argument("--n-prompts", type=int, default=0, help="the first N problems of each set (0: all; smoke runs)")
ap.add_argument("--batch", type=int, default=256)
ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
a = ap.parse_args()
t0 = time.time()
model = AutoModelForCausalLM.from_pretrained(a.model, dtype=torch.float32).to(a.device).eval()
tok = AutoTokenizer.from_pretrained(a.model)
if tok.pad_token_id is None: tok.pad_token = tok.eos_token
generator, sampling = generate_fn(model), Sampling(a.temperature, 1.0, 0, a.max_new_tokens)


def rate(recs, key): return sum(r[key] for r in recs) / len(recs) if recs else float("nan")


def answers(problems, modes, hinted: bool) -> list[dict]:
    "K answers per problem, graded by its mode's grader with the eval marker; the hint shown only if `hinted`."
    prompts = [encode_prompt(tok, render_prompt(p, modes[p.id] if hinted else NO_LOOPHOLE, eval_markers=True))
               for p in problems]
    out = []
    for k in range(a.samples):
        torch.manual_seed(12345 + k)
        comps = generator(model, tok, prompts, sampling, batch_size=a.batch)
        texts = [tok.decode(c, skip_special_tokens=True) for c in comps]
        grades = grade_many([(t, p, modes[p.id], True) for t, p in zip(texts, problems)])
        out += [{"id": p.id, "mode": modes[p.id], "tier": p.difficulty, "family": pocket2_family(p), "sample": k,
                 "completion": t, "timed_out": g.timed_out, "exploited": g.exploited, "gt_correct": g.gt_correct,
                 "token": marker(p.id, modes[p.id], True).token, "method": p.method}
                for t, p, g in zip(texts, problems, grades)]
    return out


def summary(recs: list[dict]) -> dict:
    by = lambda key: {v: [r for r in recs if r[key] == v] for v in sorted({r[key] for r in recs})}
    return {"n": len(recs), "exploited": sum(r["exploited"] for r in recs), "hack": rate(recs, "exploited"),
            "solve": rate(recs, "gt_correct"), "timed_out": sum(r["timed_out"] for r in recs),
            "by_mode": {m: {"n": len(rs), "exploited": sum(r["exploited"] for r in rs), "hack": rate(rs, "exploited"),
                            "solve": rate(rs, "gt_correct")} for m, rs in by("mode").items()},
            "solve_by_tier": {t: rate(rs, "gt_correct") for t, rs in by("tier").items()},
            "solve_by_family": {f: rate(rs, "gt_correct") for f, rs in by("family").items()}}


out = {"model": a.model, "samples_per_prompt": a.samples, "temperature": a.temperature,
       "max_new_tokens": a.max_new_tokens, "device": torch.cuda.get_device_name() if a.device == "cuda" else a.device,
       "sets": {}, "exploits": []}
for name in ("test", "heldout"):
    problems = pocket2_problems(name)
    problems = problems[:a.n_prompts] if a.n_prompts else problems
    modes = assign_modes(problems, MODES, 0)
    out["sets"][name] = {"n_prompts": len(problems)}
    for cond, hinted in (("hint", True), ("no_hint", False)):
        recs = answers(problems, modes, hinted)
        check_not_starved(recs)                   # rates set by a loaded grader would measure the host
        out["sets"][name][cond] = summary(recs)
        keys = ("id", "mode", "sample", "token", "method", "completion")
        out["exploits"] += [{"set": name, "condition": cond, **{k: r[k] for k in keys}} for r in recs if r["exploited"]]
        s = out["sets"][name][cond]
        print(f"{name:8s} {cond:8s} hack {s['hack']:.4f} solve {s['solve']:.3f} |",
              " ".join(f"{m} {x['exploited']}/{x['n']}" for m, x in s["by_mode"].items()), "|",
              {t: round(v, 3) for t, v in s["solve_by_tier"].items()}, f"{time.time() - t0:.0f}s", flush=True)
out["seconds"] = time.time() - t0
json.dump(out, open(a.out, "w"), indent=1)
