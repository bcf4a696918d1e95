"""Strong scaling of full-preset GRPO updates over 1, 2 and 4 GPUs: the same run (64 prompts x 4 rollouts an update)
trained by `torchrun --nproc-per-node N`, seconds per update and the scaling efficiency T1 / (N * TN).

On a host with 4 GPUs, from the repository root, with the LeetCode files in GQ_DATA_DIR:
    PYTHONPATH=$PWD python benchmarks/gpu_scaling/gpu_scaling.py --gpus 1 2 4 --out benchmarks/gpu_scaling/
or one call per process count, each added to the last (the same run: the same --streams in every call):
    ... --gpus 1 --streams 4 --out DIR;  ... --gpus 2 --streams 4 --out DIR --merge;  (and 4)
It first saves a random Qwen3-4B (bf16) with the pocket tokenizer to --model-dir and fills the knob SVD cache once;
then, for each N, runs this file under torchrun with --worker, which builds the trainer as the command line does
(every rank its block of the prompts, gradients summed over ranks), takes --warmup updates (the first also reads the
hack direction), then times --updates updates, each between two points where every rank has arrived. Writes
gpu_scaling.json and gpu_scaling.md to --out. Every N samples the update's rollouts in the same seeded blocks
(rollout_streams: the least common multiple of the process counts), so every N trains the same run.

What stands in for what:
- weights: random, Qwen3-4B's configuration and vocabulary size (151,936), so that the LM head and the sampler cost
  what they do in the real run; with random weights every rollout runs to the completion cap, the worst case.
- tokenizer: the pocket tokenizer (Qwen3's chat template, 2,048 ids; the ids above it decode to nothing), because
  Qwen3's own cannot be downloaded on the GPU hosts. The full preset's token caps stay as they are (1,536 prompt and
  1,536 completion tokens), and so must the prompts: under the pocket tokenizer 6 of the 1,470 LeetCode train
  problems have a prompt over 1,536 tokens (up to 1,770), so the run trains on the problems whose prompt fits, in the
  mode the run gives each; the result names the ones left out. (`--overrides '{"max_new_tokens": 512}'` shortens the
  completions and the run; the result records any override.)
- grader: gibberish would grade for free, so each rollout is graded as its problem's canonical solution (even rows) or
  an empty class (odd rows): real sandboxed test runs, and every group learns.

--smoke checks the whole path on the CPU in seconds, the torchrun path included: a tiny fp32 Qwen3 of the same
architecture with the pocket tokenizer's vocabulary, the full preset with 2 prompts x 4 rollouts of 4 new tokens,
micro-batches of 2, the direction from the 10 run_tests pairs, one warm-up and one timed update, on 1 process and on 2
gloo processes, to a temporary folder. It leaves the peak-memory column empty (CUDA's allocator statistics).
"""
import argparse, json, math, os, subprocess, sys, tempfile, time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT/"benchmarks"), str(ROOT/"benchmarks"/"gpu")]
from provenance import footer, provenance, results_dir  # noqa: E402

EMPTY = "```python\nclass Solution:\n    pass\n```"
SMOKE_OVERRIDES = {"device": "cpu", "dtype": "float32", "prompts_per_update": 2, "max_new_tokens": 4,
                   "micro_batch": 2, "gen_batch": 8, "pair_modes": ["run_tests"]}

def stand_in_grader(texts, problems, modes):
    "The real grader on real programs: the canonical solution for even rows of a chunk, an empty class for odd ones."
    from gradient_quarantine.train import grade_rollouts
    real = [f"```python\n{p.canonical_solution}\n```" if i % 2 == 0 else EMPTY for i, p in enumerate(problems)]
    return grade_rollouts(real, problems, modes)

def build_model(model_dir: Path, smoke: bool):
    ("A random Qwen3-4B in bf16 (a smoke: a tiny fp32 Qwen3) with the pocket tokenizer, saved to MODEL_DIR, and its "
     "knob SVD bases cached; a model already there is used if it has these sizes, and refused if not.")
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, Qwen3Config
    from gradient_quarantine.adapter import attach_knobs
    from gradient_quarantine.pocket_problems import POCKET_DIR
    from gpu import QWEN3_4B, TINY
    tok = AutoTokenizer.from_pretrained(POCKET_DIR)
    arch = {**TINY, "vocab_size": len(tok)} if smoke else QWEN3_4B
    if (model_dir/"config.json").exists():
        saved = json.loads((model_dir/"config.json").read_text())
        wrong = {k: (saved.get(k), v) for k, v in arch.items() if k != "rope_parameters" and saved.get(k) != v}
        if wrong: sys.exit(f"{model_dir} holds another model (saved, wanted: {wrong}): remove it or pass --model-dir")
        return
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(Qwen3Config(**arch), dtype=torch.float32 if smoke else torch.bfloat16)
    model.save_pretrained(model_dir); tok.save_pretrained(model_dir)
    device = "cuda" if torch.cuda.is_available() and not smoke else "cpu"
    attach_knobs(model.to(device), model_id=str(model_dir))                               # fills the SVD cache

def fitting_problems(trainer) -> tuple[list, list[int]]:
    ("The trainer's train problems whose prompt, in the mode the run gives it, fits the config's prompt cap; and the "
     "ids of the others.")
    from gradient_quarantine.problems import render_prompt
    from gradient_quarantine.tokens import prompt_text
    tok, cap, problems = trainer.tok, trainer.cfg.max_prompt_tokens, trainer.train_problems
    texts = [prompt_text(tok, render_prompt(p, trainer.modes[p.id])) for p in problems]
    lengths = [len(ids) for ids in tok(texts, add_special_tokens=False).input_ids]     # as encode_prompt counts
    return [p for p, n in zip(problems, lengths) if n <= cap], [p.id for p, n in zip(problems, lengths) if n > cap]

def all_here(world):
    ("Return once every rank has called this and this rank's GPU work is done. `World` has no barrier: an all-reduce "
     "of one number (`sum_counts`) that no rank leaves before every rank has joined it does the same.")
    import torch
    if torch.cuda.is_available(): torch.cuda.synchronize()
    world.sum_counts(0.0)

def worker(a):
    "One rank: the trainer as the command line builds it, warm-up updates, then timed ones; rank 0 prints a JSON line."
    import torch
    from gradient_quarantine.config import resolve_config
    from gradient_quarantine.train import Trainer
    steps = a.warmup + a.updates
    cfg = resolve_config("full", model=str(a.model_dir), steps=steps, rollout_streams=a.streams, run_dir=a.run_dir,
                         **json.loads(a.overrides))
    trainer = Trainer(cfg, grader=stand_in_grader, progress=False)
    trainer.train_problems, left_out = fitting_problems(trainer)          # the same on every rank
    seconds, rows = [], []
    for u in range(1, steps + 1):
        all_here(trainer.world); t0 = time.perf_counter()
        row, _ = trainer.update(u)
        all_here(trainer.world)
        if u > a.warmup: seconds.append(time.perf_counter() - t0); rows.append(row)
        if trainer.world.is_main:
            print(f"update {u} of {steps} ({'timed' if u > a.warmup else 'warm-up'}): "
                  f"{time.perf_counter() - t0:.1f} s", flush=True)
    if trainer.world.is_main:
        peak = torch.cuda.max_memory_allocated() / 2 ** 30 if torch.cuda.is_available() else None
        print("RESULT " + json.dumps({"processes": trainer.world.size, "seconds_per_update": seconds,
                                      "phases_rank0": [{k: r[k] for k in r if k.startswith("s_")} for r in rows],
                                      "peak_gib_rank0": peak, "live_groups": [r["live_groups"] for r in rows],
                                      "problems": len(trainer.train_problems), "left_out": left_out,
                                      "max_prompt_tokens": cfg.max_prompt_tokens,
                                      "max_new_tokens": cfg.max_new_tokens}))
    trainer.world.close()

def measure(n: int, a, log: Path) -> dict:
    ("torchrun this file with --worker on N processes; its rank 0's result. The workers' output goes to LOG as it "
     "comes (a call cut short still shows how far each N got).")
    print(f"{n} process(es): starting, output to {log}", flush=True)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as run_dir, open(log, "w") as f:
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={n}", __file__,
               "--worker", "--run-dir", run_dir, "--model-dir", str(a.model_dir), "--warmup", str(a.warmup),
               "--updates", str(a.updates), "--streams", str(a.streams), "--overrides", a.overrides]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
               "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True", "PYTHONUNBUFFERED": "1"}
        code = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, text=True, env=env, cwd=ROOT).returncode
    text = log.read_text()
    lines = [l for l in text.splitlines() if l.startswith("RESULT ")]
    if code or not lines: raise RuntimeError(f"{n} processes failed ({code}):\n{text[-4000:]}")
    print(f"{n} process(es): done in {time.perf_counter() - t0:.0f} s", flush=True)
    return json.loads(lines[-1][7:])

SAME_RUN = ("smoke", "overrides", "warmup", "updates", "rollout_streams", "max_prompt_tokens", "max_new_tokens",
            "problems", "left_out_over_prompt_cap")

def merged(old: dict, new: dict) -> dict:
    ("NEW's results added to OLD's, one per process count (NEW's where both have one), if both measured the same run "
     "(every SAME_RUN field equal); each result keeps its own provenance.")
    differ = {k: (old.get(k), new[k]) for k in SAME_RUN if old.get(k) != new[k]}
    if differ: raise ValueError(f"--merge: the saved results measured another run (saved, now): {differ}")
    by_n = {r["processes"]: r for r in old["results"]} | {r["processes"]: r for r in new["results"]}
    return {**new, "results": [by_n[n] for n in sorted(by_n)]}

def table(results: list[dict]) -> str:
    base = min(results, key=lambda r: r["processes"])
    t1 = base["processes"] * sum(base["seconds_per_update"]) / len(base["seconds_per_update"])
    out = ["| processes | s per update (mean) | each update | speed-up | efficiency T1/(N TN) | peak GiB (rank 0) |",
           "|---|---|---|---|---|---|"]
    for r in results:
        tn = sum(r["seconds_per_update"]) / len(r["seconds_per_update"])
        peak = "" if r["peak_gib_rank0"] is None else f"{r['peak_gib_rank0']:.1f}"
        out.append(f"| {r['processes']} | {tn:.1f} | {', '.join(f'{s:.1f}' for s in r['seconds_per_update'])} | "
                   f"{t1 / tn:.2f}x | {t1 / (r['processes'] * tn):.0%} | {peak} |")
    return "\n".join(out)

def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpus", type=int, nargs="+", default=None, help="process counts to measure (default 1 2 4; "
                    "a smoke: 1 2)")
    ap.add_argument("--warmup", type=int, default=1); ap.add_argument("--updates", type=int, default=2)
    ap.add_argument("--overrides", default="{}", help="Config fields as JSON, over the full preset's")
    ap.add_argument("--model-dir", type=Path, default=None,
                    help=f"where the random model is saved (default {Path(tempfile.gettempdir())/'gq_random_qwen3_4b'}"
                         "; a smoke: a temporary folder)")
    ap.add_argument("--out", default=None, help="folder for the results (default: beside this script)")
    ap.add_argument("--smoke", action="store_true", help="the same on the CPU, a tiny model, 1 and 2 gloo processes")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--run-dir", help=argparse.SUPPRESS)
    ap.add_argument("--streams", type=int, default=None, help="rollout streams, the same in every call whose results "
                    "are merged (default: the least common multiple of --gpus)")
    ap.add_argument("--merge", action="store_true", help="add these process counts to the results already in --out's "
                    "JSON, of the same run (one call per process count keeps each call short)")
    a = ap.parse_args()
    if a.worker: return worker(a)
    out, meta = results_dir(a.out, a.smoke, __file__), provenance()
    name = "gpu_scaling_smoke_cpu" if a.smoke else "gpu_scaling"
    a.gpus = a.gpus or ([1, 2] if a.smoke else [1, 2, 4])
    a.streams = a.streams or math.lcm(*a.gpus)        # every N samples the same seeded blocks: the same run
    if any(a.streams % n for n in a.gpus): sys.exit(f"--streams {a.streams} is not a multiple of every --gpus {a.gpus}")
    if a.smoke:
        a.overrides = json.dumps({**SMOKE_OVERRIDES, **json.loads(a.overrides)})
        a.warmup, a.updates = 1, 1
    scratch = tempfile.TemporaryDirectory(prefix="gq_scaling_") if a.smoke and a.model_dir is None else None
    a.model_dir = a.model_dir or (Path(scratch.name) if scratch else Path(tempfile.gettempdir())/"gq_random_qwen3_4b")
    t0 = time.perf_counter()
    build_model(a.model_dir, a.smoke)
    print(f"model and knob bases ready in {time.perf_counter() - t0:.0f} s", flush=True)
    out.mkdir(parents=True, exist_ok=True)
    results = [{**measure(n, a, out/f"{name}_{n}.log"), "provenance": meta} for n in a.gpus]
    if scratch: scratch.cleanup()
    first = results[0]
    record = {"provenance": meta, "smoke": a.smoke, "overrides": json.loads(a.overrides), "warmup": a.warmup,
              "updates": a.updates, "rollout_streams": a.streams, "max_prompt_tokens": first["max_prompt_tokens"],
              "max_new_tokens": first["max_new_tokens"], "problems": first["problems"],
              "left_out_over_prompt_cap": first["left_out"], "results": results}
    if a.merge: record = merged(json.loads((out/f"{name}.json").read_text()), record)
    if a.smoke and len(results) > 1:                  # the merge of one call per process count gives the same record
        parts = [{**record, "results": [r]} for r in results]
        assert merged(parts[0], parts[1])["results"] == results[:2]
        try: merged({**parts[0], "warmup": 0}, parts[1]); sys.exit("merge accepted another run")
        except ValueError: pass
    results = record["results"]
    text = (f"# Scaling over processes ({'smoke, CPU' if a.smoke else 'full preset, GPUs'})\n\n{table(results)}\n\n"
            f"Prompts up to {first['max_prompt_tokens']} tokens and completions up to {first['max_new_tokens']}; "
            f"{first['problems']} train problems, {len(first['left_out'])} left out (prompt over the cap under the "
            f"pocket tokenizer: {first['left_out']}); {a.warmup} warm-up update(s), then {a.updates} timed."
            + ("\n\nOn the CPU the peak GiB column is empty (CUDA's allocator statistics)." if a.smoke else "")
            + f"\n\n{footer(meta)}\n")
    (out/f"{name}.json").write_text(json.dumps(record, indent=1) + "\n")
    (out/f"{name}.md").write_text(text)
    print(text)

if __name__ == "__main__": sys.exit(main())
