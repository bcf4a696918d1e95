"""Liveness of vanilla GRPO on pocket2: per seed and per mode the train hack (logged oracle labels of the rollouts)
and the deploy hack on the in-family test set (the run's own evaluation), plus each run's deployed model evaluated on
the held-out-family test set (RUN/eval/deploy_heldout.json, which the trainer writes; for runs from before it did,
evaluated here and written), pooled over the seeds.

Run from the repository root, after the runs finished:
    python scripts/pocket2_liveness.py --out liveness.json RUN_DIR [RUN_DIR ...]
Train hack per mode is the share of that mode's rollouts that exploited, in the last `--window` updates (default 10)
and over the whole run. Exploited rollouts of the window (up to --keep per seed and mode, in logged order) are kept for
the overlap check of 08a_pocket2, each with its training marker and the problem's method.
"""
import argparse, json, time
from pathlib import Path
from gradient_quarantine.artifacts import read_json, read_jsonl, write_json
from gradient_quarantine.evaluate import Sampling, evaluate
from gradient_quarantine.pocket2_problems import pocket2_problems
from gradient_quarantine.problems import assign_modes
from gradient_quarantine.rewards import MODES, marker
from gradient_quarantine.train import load_test_sets, open_run

ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ap.add_argument("runs", nargs="+"); ap.add_argument("--out", required=True)
ap.add_argument("--window", type=int, default=10); ap.add_argument("--keep", type=int, default=25)
ap.add_argument("--eval-n", type=int, default=0, help="the first N held-out problems (0: all; smoke runs)")
a = ap.parse_args()
t0 = time.time()


def rate(recs, key="exploited"): return sum(r[key] for r in recs) / len(recs) if recs else float("nan")


def per_mode(recs, key="exploited") -> dict:
    return {m: {"n": len(rs), "hack": rate(rs, key), "exploited": sum(r[key] for r in rs)}
            for m in MODES if (rs := [r for r in recs if r["mode"] == m])}


def heldout_eval(run_dir: Path) -> dict:
    """The run's deployed model (quarantine off) on the held-out-family test set: the trainer's own evaluation where it
    wrote one, else evaluated here as the trainer evaluates its test set (and written)."""
    if (run_dir/"eval"/"deploy_heldout.json").exists(): return read_json(run_dir/"eval"/"deploy_heldout.json")
    run = open_run(run_dir)
    cfg, problems = run.cfg, load_test_sets(run.cfg)["heldout"]
    problems = problems[:a.eval_n] if a.eval_n else problems
    res = evaluate(run.model, run.knobs, run.tok, problems, assign_modes(problems, cfg.modes, cfg.mode_seed),
                   state="deploy", sampling=Sampling(cfg.eval_temperature, cfg.top_p, cfg.top_k,
                                                     cfg.eval_max_new_tokens),
                   batch_size=cfg.eval_batch, max_prompt_tokens=cfg.max_prompt_tokens)
    res["test_set"] = "heldout"
    write_json(run_dir/"eval"/"deploy_heldout.json", res)
    return res


problems = {p.id: p for p in pocket2_problems("train")}
seeds, pooled = {}, {"train_window": [], "deploy": [], "heldout": []}
for d in map(Path, a.runs):
    cfg, status = read_json(d/"config.json"), read_json(d/"status.json")
    if not status.get("complete"): raise RuntimeError(f"{d} is not complete: {status}")
    rollouts, steps = read_jsonl(d/"rollouts.jsonl.gz"), cfg["steps"]
    window = [r for r in rollouts if r["update"] > steps - a.window]
    deploy, held = read_json(d/"eval"/"deploy.json"), heldout_eval(d)
    pooled["train_window"] += window; pooled["deploy"] += deploy["records"]; pooled["heldout"] += held["records"]
    kept = [r for m in MODES for r in [r for r in window if r["exploited"] and r["mode"] == m][:a.keep]]
    seeds[d.name] = {
        "seed": cfg["seed"], "arm": cfg["arm"], "preset": cfg["preset"], "steps": steps,
        "train_hack_window": rate(window), "train_hack_window_by_mode": per_mode(window),
        "train_hack_by_mode": per_mode(rollouts), "peak_train_hack": max(r["train_hack"] for r in
                                                                         read_jsonl(d/"metrics.jsonl")),
        "deploy": {"hack": deploy["hack"], "solve": deploy["solve"], "n": deploy["n"],
                   "by_mode": per_mode(deploy["records"])},
        "heldout": {"hack": held["hack"], "solve": held["solve"], "n": held["n"], "by_mode": per_mode(held["records"])},
        "exploits": [{"update": r["update"], "mode": r["mode"], "problem": r["problem"],
                      "token": marker(r["problem"], r["mode"]).token, "method": problems[r["problem"]].method,
                      "completion": r["completion"]} for r in kept]}
    s = seeds[d.name]
    print(f"{d.name:24s} train hack (last {a.window}) {s['train_hack_window']:.3f} |",
          " ".join(f"{m} {x['hack']:.2f}" for m, x in s["train_hack_window_by_mode"].items()),
          f"| deploy {s['deploy']['hack']:.3f} |", " ".join(f"{m} {x['hack']:.2f}" for m, x in
                                                           s["deploy"]["by_mode"].items()),
          f"| held-out {s['heldout']['hack']:.3f} solve {s['heldout']['solve']:.3f}", flush=True)
out = {"window": a.window, "runs": seeds,
       "pooled": {"train_hack_window_by_mode": per_mode(pooled["train_window"]),
                  "deploy_by_mode": per_mode(pooled["deploy"]), "heldout_by_mode": per_mode(pooled["heldout"]),
                  "deploy": {"hack": rate(pooled["deploy"]), "solve": rate(pooled["deploy"], "gt_correct")},
                  "heldout": {"hack": rate(pooled["heldout"]), "solve": rate(pooled["heldout"], "gt_correct")}},
       "seconds": time.time() - t0}
p = out["pooled"]
print("pooled over", len(seeds), "runs | train hack (window)",
      " ".join(f"{m} {x['hack']:.3f}" for m, x in p["train_hack_window_by_mode"].items()), "| deploy",
      " ".join(f"{m} {x['hack']:.3f}" for m, x in p["deploy_by_mode"].items()), "| held-out",
      " ".join(f"{m} {x['hack']:.3f}" for m, x in p["heldout_by_mode"].items()))
json.dump(out, open(a.out, "w"), indent=1)
