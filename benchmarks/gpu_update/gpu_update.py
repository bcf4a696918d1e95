"""One full-preset GRPO update on one GPU: a random Qwen3-4B with knobs, 64 LeetCode prompts x 4 rollouts generated to
the 1536-token cap (random weights almost never emit end-of-turn: the worst case), with the wall time split into
generation, grading, loss+backward and optimizer, the peak GPU memory, and the same batch's learning step for vanilla,
route2b per rollout and route2b per token. An arm named ARM+merged learns on the merged knob path
(`knob_path="merged"`), ARM@N in micro-batches of N rollouts (both may be combined: vanilla+merged@4).

On the GPU machine, from the repository root, with the LeetCode files in GQ_DATA_DIR (about 5 minutes):
    export PYTHONPATH=$PWD GQ_DATA_DIR=...; python benchmarks/gpu_update/gpu_update.py --out benchmarks/gpu_update/
Writes gpu_update.json and gpu_update.md to --out (default: beside this script) after every phase; exits 1 if an arm
failed. --smoke checks the script on the CPU in seconds: a tiny fp32 Qwen3 of the same architecture with the pocket
tokenizer's vocabulary, 2 prompts x 4 rollouts of 4 new tokens, micro-batches of 2, the first 16 problems that fit, the
direction from the 10 run_tests pairs, to a temporary folder; its `peak GPU GiB` column is empty (CUDA's allocator
statistics) and its generation has no graph captures (CUDA graphs).

What stands in for what, and why:
- weights: random (gpu.build), bf16; knob bases random (svd_basis of 252 matrices takes minutes; the cost depends on
  shapes only); knobs set to small random values, as after some training, so generation pays for merging them.
- tokenizer: the pocket tokenizer (Qwen chat template, 2,048 ids); Qwen3's own cannot be downloaded. LeetCode prompts
  tokenize to about 540 tokens with it (Qwen3's tokenizer gives a similar count); problems whose prompt is over 1,024
  tokens are left out, so that no drawn prompt trips the 1,536-token cap.
- grader: gibberish completions would make grading free, so each rollout is graded as if it were the problem's canonical
  solution (even rollouts) or an empty class (odd ones): real sandboxed test runs, and reward spread in every group, so
  all 256 rollouts learn.
- each arm learns from the rollouts as `learn` meets them in training: every chunk but the last graded, the last one
  just handed to the grader, so the arm's update total counts the grading it still had to wait for (`s_grade`).
"""
import argparse, atexit, dataclasses, json, os, platform, shutil, sys, tempfile, time, traceback
from concurrent.futures import Future
from functools import partial
from pathlib import Path
import torch
import transformers
from transformers import AutoTokenizer

sys.path[:0] = [str(Path(__file__).resolve().parents[1]/"gpu"), str(Path(__file__).resolve().parents[1])]
import gpu                                                  # benchmarks/gpu/gpu.py: the random model and helpers
from provenance import footer, provenance, results_dir
from gradient_quarantine import adapter, train
from gradient_quarantine.fastgen import fast_generate
from gradient_quarantine.pocket import POCKET_DIR
from gradient_quarantine.problems import render_prompt
from gradient_quarantine.tokens import encode_prompt, make_batch, token_logprobs

EMPTY = "```python\nclass Solution:\n    pass\n```"
log, peak_gib, free_memory = gpu.log, gpu.peak_gib, gpu.free_memory

def stand_in_grader(texts, problems, modes):
    "grade_rollouts on real programs: the canonical solution for even rollouts of a chunk, an empty class for odd ones."
    real = [f"```python\n{p.canonical_solution}\n```" if i % 2 == 0 else EMPTY for i, p in enumerate(problems)]
    return train.grade_rollouts(real, problems, modes)

def as_at_end_of_generation(ro, grader):
    ("The same rollouts, their grades as `learn` meets them in training: every chunk but the last graded, "
     "the last just handed to `grader`.")
    grades = train.Grades(grader, ro.problems, ro.modes)
    *graded, (last, _) = ro.grades.chunks
    for rows, _ in graded:
        done = Future(); done.set_result(([ro.grades.rewards[i] for i in rows], [ro.grades.labels[i] for i in rows]))
        grades.chunks.append((rows, done))
        for i in rows: grades.texts[i] = ro.texts[i]
    grades.submit(last, [ro.texts[i] for i in last]); grades.close()
    return dataclasses.replace(ro, grades=grades)

def profile_learn(trainer, ro, dev, top: int = 14) -> list[dict]:
    ("CUDA time by kernel (CPU: by op) of one vanilla learning micro-batch: the knobs-off reference forward, "
     "the policy forward and the backward.")
    rows = list(range(trainer.cfg.micro_batch))
    b = make_batch([ro.prompts[i] for i in rows], [ro.comps[i] for i in rows], trainer.tok.pad_token_id).to(dev)
    def step():
        with torch.no_grad(), trainer.knobs.off(): token_logprobs(trainer.model, b)
        (token_logprobs(trainer.model, b) * b.completion_mask).sum().backward()
    step(); gpu.sync(dev)
    t0 = time.perf_counter(); step(); gpu.sync(dev); wall = time.perf_counter() - t0
    table = gpu.kernel_table(step, dev, top=top,
                             total_label=f"all kernels (wall {wall:.2f} s, {b.input_ids.numel()} tokens)", digits=1)
    trainer.opt.zero_grad(set_to_none=True)
    return table

def cell(value) -> str: return "" if value is None else str(value)

def write(out: Path, report: dict):
    out.mkdir(parents=True, exist_ok=True)
    (out/"gpu_update.json").write_text(json.dumps(report, indent=1) + "\n")
    e, g, arms = report["env"], report.get("generation", {}), report.get("arms", [])
    lines = [f"# One full-preset update on {e['device_name']}", "",
             f"Random {e.get('arch', 'Qwen3-4B configuration, bf16')} (knobs attached with random bases and small "
             f"random values), "
             f"the full preset ({e['rollouts']} rollouts = {e['prompts']} prompts x {e['group_size']}, "
             f"up to {e['max_new_tokens']} new tokens, micro-batch {e['micro_batch']}, "
             f"generation batch {e['gen_batch']}), "
             f"LeetCode prompts (mean {e.get('prompt_mean')} tokens, max {e.get('prompt_max')}). "
             f"Every rollout ran to {g.get('completion_mean', '?')} tokens on average (the cap is the worst case).", ""]
    if g:
        lines += ["| phase | seconds | peak GPU GiB | note |", "|---|---|---|---|",
                  f"| direction (pair gradients, every {e['refresh_every']} updates) | {report.get('direction_s')} | | "
                  f"amortised: {round(report.get('direction_s', 0) / e['refresh_every'], 1)} s per update |",
                  f"| generation | {g['s_generate']} | {cell(g['peak_gib'])} | "
                  f"{g['chunks']} chunks of {g['chunk_rows']} rows, {g.get('attention')} attention; "
                  f"decode {g['decode_s']} s ({g['ms_per_step']} ms/step), prefill {g['prefill_s']} s, "
                  f"{g.get('captures')} graph captures {g['capture_s']} s, fuse {g['fuse_s']} s |",
                  f"| grading all alone | {report.get('grading_alone_s')} | | on {os.cpu_count()} cores; "
                  f"in the update it overlaps generation (earlier chunks) and learning (the last chunk) |"]
    for a in arms:
        lines.append(f"| loss+backward, {a['arm']} | {a['s_backward']} | {cell(a['peak_gib'])} | "
                     f"waited {a['s_grade']} s for grades; optimizer {a['s_optimizer']} s; "
                     f"update total {a['update_s']} s"
                     + (f" ({a['update_with_refresh_s']} s with the refresh amortised)"
                        if "update_with_refresh_s" in a else "") + f"; {a.get('vs_vanilla', '')} |")
    lines += ["", f"- **update total** = generation + the time learning waited for grades + loss+backward + optimizer "
              f"of that arm; for route2b also with its direction refresh amortised over {e['refresh_every']} updates.",
              f"- micro-batches of at most {e['micro_batch']} rollouts "
              f"and {e.get('micro_batch_tokens')} padded tokens; an arm named ARM@N, of N rollouts and the token cap "
              f"scaled alike.",
              f"- torch {e['torch']}, transformers {e['transformers']}, Python {e['python']}; "
              f"{report.get('seconds', 0):.0f} s in all.",
              *(["- On the CPU the peak GPU memory is empty (CUDA's allocator statistics) and generation captures no "
                 "CUDA graphs."] if e["device_name"].startswith("CPU") else [])]
    if isinstance(prof := report.get("profile"), list):
        lines += ["", "## Where a learning micro-batch goes", "",
                  f"One vanilla micro-batch of {e['micro_batch']} rollouts (reference forward, "
                  "policy forward, backward), CUDA time by kernel:", "",
                  "| kernel | calls | ms | share |", "|---|---|---|---|",
                  *[f"| `{r['kernel']}` | {r['calls']} | {r['ms']} | {r['share']} |" for r in prof]]
    if report.get("errors"): lines += ["", "Errors:", *[f"- {x}" for x in report["errors"]]]
    lines += ["", footer(report["provenance"])]
    (out/"gpu_update.md").write_text("\n".join(lines) + "\n")

ARMS = ["vanilla", "route2b/rollout", "route2b/token", "vanilla"]

def micro_batch_of(cfg, rows: str) -> dict:
    "The Config changes of an arm's `@N`: N rollouts a micro-batch, the padded-token cap scaled alike ({}: none)."
    if not rows: return {}
    n = int(rows)
    if n < 1: raise ValueError(f"a micro-batch of {n} rollouts")
    return {"micro_batch": n, "micro_batch_tokens": cfg.micro_batch_tokens * n // cfg.micro_batch}

def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=None, help="folder for the results (default: beside this script)")
    ap.add_argument("--max-new-tokens", type=int, default=None, help="default: the full preset's 1536")
    ap.add_argument("--prompts", type=int, default=None, help="prompts per update, default: the full preset's 64")
    ap.add_argument("--micro-batch", type=int, default=None, help="default: the full preset's")
    ap.add_argument("--smoke", action="store_true",
                    help="a tiny fp32 model on CPU, 2 prompts, 4 new tokens: checks the script")
    ap.add_argument("--arms", nargs="+", default=ARMS,
                    help="learned in this order on the same rollouts; an arm named twice is timed again "
                         "(the first arm meets every sequence length fresh, the later ones do not); ARM@N learns "
                         "in micro-batches of N rollouts (and N/micro-batch times the padded-token cap); "
                         "ARM+merged on the merged knob path")
    ap.add_argument("--profile", action="store_true",
                    help="end with a by-kernel profile of one learning micro-batch (vanilla); it runs last, "
                         "as steps after a profile ran slower")
    a = ap.parse_args()
    out, dev = results_dir(a.out, a.smoke, __file__), torch.device("cpu" if a.smoke else "cuda")
    if a.smoke: a.max_new_tokens, a.prompts, a.micro_batch = a.max_new_tokens or 4, a.prompts or 2, a.micro_batch or 2
    if a.smoke and a.arms == ARMS: a.arms = [*ARMS, "vanilla@1", "route2b/rollout+merged"]   # and @N, +merged
    tok = AutoTokenizer.from_pretrained(POCKET_DIR)
    train_all, test_all = train.load_substrate(train.resolve_config("full"))
    fits = [p for p in train_all[:16 if a.smoke else None]
            if all(len(encode_prompt(tok, render_prompt(p, m))) <= 1024 for m in train.MODES)]
    model = gpu.build({**gpu.TINY, "vocab_size": len(tok)} if a.smoke else gpu.QWEN3_4B,
                      torch.float32 if a.smoke else torch.bfloat16, dev, knobs=False)
    train.load_substrate = lambda cfg: (fits, test_all[:8])                    # the stand-ins named in the docstring
    train.load_policy = lambda cfg, problems: (model, tok)
    adapter.svd_basis = gpu.random_basis
    run_dir = tempfile.mkdtemp(); atexit.register(shutil.rmtree, run_dir, True)
    cfg = train.resolve_config("full", arm="route2b", seed=0, steps=5, run_dir=run_dir,
                               model="random-qwen3-4b", device=dev.type, dtype="float32" if a.smoke else "bfloat16",
                               max_new_tokens=a.max_new_tokens, prompts_per_update=a.prompts, micro_batch=a.micro_batch,
                               pair_modes=["run_tests"] if a.smoke else None)
    trainer = train.Trainer(cfg, grader=stand_in_grader, progress=False)
    with torch.no_grad():
        for p in trainer.knobs.parameters(): p.normal_(0, 0.02)
    gen_stats = {}
    trainer.generator = partial(fast_generate, stats=gen_stats)
    env = {"device_name": torch.cuda.get_device_name(dev) if dev.type == "cuda" else "CPU (smoke)",
           "arch": "tiny Qwen3, fp32" if a.smoke else "Qwen3-4B configuration, bf16",
           "rollouts": cfg.prompts_per_update * cfg.group_size, "prompts": cfg.prompts_per_update,
           "group_size": cfg.group_size, "max_new_tokens": cfg.max_new_tokens, "micro_batch": cfg.micro_batch,
           "micro_batch_tokens": cfg.micro_batch_tokens, "gen_batch": cfg.gen_batch,
           "refresh_every": cfg.refresh_every, "problems_kept": len(fits), "problems": len(train_all),
           "torch": torch.__version__, "transformers": transformers.__version__, "python": platform.python_version()}
    report = {"provenance": provenance(), "smoke": a.smoke, "env": env, "errors": []}
    log(f"trainer ready: {len(fits)}/{len(train_all)} problems with prompts <= 1024 tokens")

    gpu.sync(dev); t0 = time.perf_counter()
    # the direction and band from the pairs (cached for the update)
    trainer.gate(1)
    gpu.sync(dev); report["direction_s"] = round(time.perf_counter() - t0, 1)
    log(f"direction: {report['direction_s']} s")

    free_memory(dev)
    ro = trainer.rollouts(1)
    lens = [len(p) for p in ro.prompts]
    env.update(prompt_mean=round(sum(lens) / len(lens)), prompt_max=max(lens))
    steps = gen_stats["decode_steps"] - gen_stats["captures"]
    report["generation"] = g = {
        "s_generate": round(ro.s_generate, 1), "peak_gib": peak_gib(dev),
        "completion_mean": round(sum(map(len, ro.comps)) / len(ro.comps)), "chunk_rows": gen_stats["chunk_rows"],
        "chunks": -(-len(ro.comps) // gen_stats["chunk_rows"]), "decode_s": round(gen_stats["decode_s"], 1),
        "ms_per_step": round(1e3 * (gen_stats["decode_s"] - gen_stats["capture_s"]) / steps, 2),
        "prefill_s": round(gen_stats["prefill_s"], 1), "capture_s": round(gen_stats["capture_s"], 1),
        "captures": gen_stats["captures"], "fuse_s": round(gen_stats["fuse_s"], 1), "attention": gen_stats["attention"],
        "rewards_mean": round(sum(ro.rewards) / len(ro.rewards), 3)}
    log("generation", g); write(out, {**report, "seconds": time.perf_counter() - gpu.T0})
    t0 = time.perf_counter(); stand_in_grader(ro.texts, ro.problems, ro.modes)
    report["grading_alone_s"] = round(time.perf_counter() - t0, 1)

    report["arms"] = []
    for i, name in enumerate(a.arms):
        spec, _, rows = name.partition("@")
        spec, _, path = spec.partition("+")
        if path not in ("", "merged"): raise ValueError(f"arm {name!r}: the knob path after '+' can only be 'merged'")
        arm, gran = (spec.split("/") + ["rollout"])[:2]
        label = f"{name}, again" if name in a.arms[:i] else name
        trainer.cfg = dataclasses.replace(cfg, arm=arm, granularity=gran, knob_path=path or "separate",
                                          **micro_batch_of(cfg, rows))
        for p in trainer.knobs.quarantine_parameters(): p.requires_grad_(arm != "vanilla")
        free_memory(dev)
        try: row, _ = trainer.learn(1, ro if i == 0 else as_at_end_of_generation(ro, stand_in_grader))
        except Exception as e:
            report["errors"].append(f"{label}: {e!r}"[:300]); traceback.print_exc(); break
        rec = {"arm": label, "micro_batch": trainer.cfg.micro_batch,
               "micro_batch_tokens": trainer.cfg.micro_batch_tokens, "s_grade": round(row["s_grade"], 2),
               "s_backward": round(row["s_backward"], 1),
               "s_optimizer": round(row["s_optimizer"], 2),
               "peak_gib": peak_gib(dev), "frout": None if row["frout"] != row["frout"] else round(row["frout"], 3)}
        rec["update_s"] = round(g["s_generate"] + rec["s_grade"] + rec["s_backward"] + rec["s_optimizer"], 1)
        if arm == "route2b":
            rec["update_with_refresh_s"] = round(rec["update_s"] + report["direction_s"] / cfg.refresh_every, 1)
        report["arms"].append(rec)
        log(label, rec); write(out, {**report, "seconds": time.perf_counter() - gpu.T0})
    is_base = lambda r: r["arm"].split(",")[0] == "vanilla"                # vanilla at the preset's micro-batch
    for base in [r for r in report["arms"] if is_base(r)][:2]:
        for r in report["arms"]:
            if not is_base(r):
                refresh = (f" (with the refresh {r['update_with_refresh_s'] / base['update_s'] - 1:+.1%})"
                           if "update_with_refresh_s" in r else "")
                r["vs_vanilla"] = "; ".join(filter(None, [
                    r.get("vs_vanilla"), f"update {r['update_s'] / base['update_s'] - 1:+.1%}{refresh}, "
                    f"loss+backward {r['s_backward'] / base['s_backward'] - 1:+.1%} vs {base['arm']}"]))
    # last: the profiler slows the steps after it
    if a.profile:
        try: report["profile"] = profile_learn(trainer, ro, dev)
        except Exception as e: report["errors"].append(f"profile: {e!r}"[:300]); traceback.print_exc()
        log("learn profile", report.get("profile")); free_memory(dev)
    report["seconds"] = time.perf_counter() - gpu.T0
    write(out, report)
    print((out/"gpu_update.md").read_text(), flush=True)
    if report["errors"]: sys.exit(f"failed: {report['errors']}")

if __name__ == "__main__": main()
