"""Strong scaling of full-preset GRPO updates over 1, 2 and 4 GPUs: the same run (64 prompts x 4 rollouts an update)
trained by `torchrun --nproc-per-node N`, seconds per update and the scaling efficiency T1 / (N * TN).

On a host with 4 GPUs, from the repository root, with the LeetCode files in GQ_DATA_DIR:
    PYTHONPATH=$PWD python benchmarks/gpu_scaling/gpu_scaling.py --gpus 1 2 4 --out benchmarks/gpu_scaling/
It first saves a random Qwen3-4B (bf16, the pocket tokenizer: Qwen3's own cannot be downloaded here) to --model-dir
and fills the knob SVD cache once; then, for each N, runs this file under torchrun with --worker, which builds the
trainer exactly as the command line does (every rank its block of the prompts, gradients summed over ranks), takes
--warmup updates, then times --updates updates. Writes gpu_scaling.json and gpu_scaling.md to --out.

What stands in for what: random weights (generation runs to the completion cap: the worst case; --overrides
'{"max_new_tokens": 512}' by default keeps one N under a few minutes), and a grader that scores each rollout as the
problem's canonical solution (even rows) or an empty class (odd rows), so the grading is real and every group learns.

On CPUs, `--smoke` does the same with the smoke preset over gloo processes (N processes instead of N GPUs): a check
that the script runs, not a measurement of anything a GPU does.
"""
import argparse, json, os, platform, subprocess, sys, tempfile, time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EMPTY = "```python\nclass Solution:\n    pass\n```"

def stand_in_grader(texts, problems, modes):
    "The real grader on real programs: the canonical solution for even rows of a chunk, an empty class for odd ones."
    from gradient_quarantine.train import grade_rollouts
    real = [f"```python\n{p.canonical_solution}\n```" if i % 2 == 0 else EMPTY for i, p in enumerate(problems)]
    return grade_rollouts(real, problems, modes)

def build_model(model_dir: Path):
    "A random Qwen3-4B in bf16 with the pocket tokenizer, saved once, and its knob SVD bases cached once."
    if (model_dir/"config.json").exists(): return
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, Qwen3Config
    from gradient_quarantine.adapter import attach_knobs
    from gradient_quarantine.pocket_problems import POCKET_DIR
    sys.path.insert(0, str(ROOT/"benchmarks"/"gpu"))
    from gpu import QWEN3_4B
    tok = AutoTokenizer.from_pretrained(POCKET_DIR)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(Qwen3Config(**{**QWEN3_4B, "vocab_size": len(tok)}), dtype=torch.bfloat16)
    model.save_pretrained(model_dir); tok.save_pretrained(model_dir)
    attach_knobs(model.to("cuda" if torch.cuda.is_available() else "cpu"), model_id=str(model_dir))  # fills the cache

def worker(a):
    "One rank: the trainer as the command line builds it, warm-up updates, then timed ones; rank 0 prints a JSON line."
    import torch
    from gradient_quarantine.config import resolve_config
    from gradient_quarantine.train import Trainer
    overrides = json.loads(a.overrides)
    steps = a.warmup + a.updates
    if a.smoke: cfg = resolve_config("smoke", steps=steps, rollout_streams=4, run_dir=a.run_dir, **overrides)
    else: cfg = resolve_config("full", model=a.model_dir, steps=steps, rollout_streams=4, run_dir=a.run_dir,
                               **overrides)
    trainer = Trainer(cfg, grader=None if a.smoke else stand_in_grader, progress=False)
    seconds, rows = [], []
    for u in range(1, steps + 1):
        trainer.world.barrier(); t0 = time.perf_counter()
        row, _ = trainer.update(u)
        trainer.world.barrier()
        if u > a.warmup: seconds.append(time.perf_counter() - t0); rows.append(row)
    if trainer.world.is_main:
        peak = torch.cuda.max_memory_allocated() / 2 ** 30 if torch.cuda.is_available() else None
        print("RESULT " + json.dumps({"processes": trainer.world.size, "seconds_per_update": seconds,
                                      "phases_rank0": [{k: r[k] for k in r if k.startswith("s_")} for r in rows],
                                      "peak_gib_rank0": peak, "live_groups": [r["live_groups"] for r in rows]}))
    trainer.world.close()

def measure(n: int, a) -> dict:
    "torchrun this file with --worker on N processes; its rank 0's result."
    with tempfile.TemporaryDirectory() as run_dir:
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={n}", __file__,
               "--worker", "--run-dir", run_dir, "--model-dir", str(a.model_dir), "--warmup", str(a.warmup),
               "--updates", str(a.updates), "--overrides", a.overrides, *(["--smoke"] if a.smoke else [])]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
               "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}
        done = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT)
    lines = [l for l in done.stdout.splitlines() if l.startswith("RESULT ")]
    if done.returncode or not lines:
        raise RuntimeError(f"{n} processes failed ({done.returncode}):\n{done.stderr[-4000:]}")
    return json.loads(lines[-1][7:])

def table(results: list[dict]) -> str:
    base = min(results, key=lambda r: r["processes"])
    t1 = base["processes"] * sum(base["seconds_per_update"]) / len(base["seconds_per_update"])
    out = ["| processes | s per update (mean) | each update | speed-up | efficiency T1/(N TN) | peak GiB (rank 0) |",
           "|---|---|---|---|---|---|"]
    for r in results:
        tn = sum(r["seconds_per_update"]) / len(r["seconds_per_update"])
        out.append(f"| {r['processes']} | {tn:.1f} | {', '.join(f'{s:.1f}' for s in r['seconds_per_update'])} | "
                   f"{t1 / tn:.2f}x | {t1 / (r['processes'] * tn):.0%} | {r['peak_gib_rank0'] or '-'} |")
    return "\n".join(out)

if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpus", type=int, nargs="+", default=[1, 2, 4], help="process counts to measure (each divides 4)")
    ap.add_argument("--warmup", type=int, default=1); ap.add_argument("--updates", type=int, default=2)
    ap.add_argument("--overrides", default='{"max_new_tokens": 512}', help="Config fields as JSON")
    ap.add_argument("--model-dir", type=Path, default=Path(tempfile.gettempdir())/"gq_random_qwen3_4b")
    ap.add_argument("--out", type=Path, default=Path(__file__).parent)
    ap.add_argument("--smoke", action="store_true", help="CPU check: the smoke preset over gloo processes")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--run-dir", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker: sys.exit(worker(a))
    if a.smoke and a.overrides == ap.get_default("overrides"): a.overrides = "{}"
    if not a.smoke: build_model(a.model_dir)
    results = [measure(n, a) for n in a.gpus]
    name = "gpu_scaling_smoke_cpu" if a.smoke else "gpu_scaling"
    record = {"host": {"node": platform.node(), "cpus": os.cpu_count()}, "smoke": a.smoke, "overrides": a.overrides,
              "warmup": a.warmup, "results": results}
    a.out.mkdir(parents=True, exist_ok=True)
    (a.out/f"{name}.json").write_text(json.dumps(record, indent=1) + "\n")
    (a.out/f"{name}.md").write_text(f"# Scaling over processes ({'smoke, CPU' if a.smoke else 'full preset, GPUs'})\n\n"
                                    + table(results) + "\n")
    print(table(results))
