"""Four measurements of the remaining levers of the full-preset update, on one GPU, in one call
(random Qwen3-4B with knobs, bf16):

1. prefill: the update's real prompt lengths (LeetCode prompts, two chunks of 128 rows sorted by length, a 128-row cache
   of 2,560 slots as in the update), timed chunk by chunk, for the SDPA backends the prefill may use; with the caching
   allocator's retry count (a retry frees every cached block and waits for the device). (The committed gpu_diag.json
   also has the prefill with its length rounded up to a multiple of 64, an option of `StaticDecoder` removed after this
   measurement found no gain.)
2. one learning micro-batch (learn_step.py's: reference forward, policy forward, backward; fresh lengths) under each
   SDPA backend;
3. a direction refresh: the 37 LeetCode-style pairs with 2 sequences per backward (the full preset's micro-batch)
   against a token budget of 2 x (1536 + 1536), and the largest relative difference of the gradients;
4. grading on the host's cores: five updates of logged pocket rollouts (64 each) and the 119 canonical LeetCode
   solutions.

On the GPU machine, from the repository root, with the LeetCode files in GQ_DATA_DIR (about 4 minutes):
    export PYTHONPATH=$PWD; python benchmarks/gpu_diag/gpu_diag.py --out $OUT
Writes gpu_diag.json (default: beside this script; gpu_diag.md there is written by hand from it) after every part;
exits 1 if a part failed. --smoke checks the script on the CPU in seconds, every part on a tiny fp32 Qwen3 of the same
architecture with the pocket tokenizer's vocabulary and every SDPA backend the math one: grading 2 logged rollouts and
2 canonical solutions, a prefill of 2 x 4 prompts from the first 16 problems, learning rows of 2 x (24 + 8) tokens
(one micro-batch, one round), a refresh on 4 pairs, to a temporary folder. On the CPU the prefill's allocator retries
are 0 and the peak memory empty (CUDA's allocator statistics), and the profiles are CPU time by operator.
"""
import argparse, json, os, platform, random, sys, time, traceback
from pathlib import Path
import torch
import transformers
from torch.nn.attention import SDPBackend, sdpa_kernel
from transformers import AutoTokenizer
sys.path[:0] = [str(Path(__file__).parent.parent/"gpu"), str(Path(__file__).parent.parent/"learn_step")]
import gpu, learn_step
from gradient_quarantine import train
from gradient_quarantine.direction import pair_gradients
from gradient_quarantine.evaluate import Sampling
from gradient_quarantine.fastgen import StaticDecoder, fuse_rms_norms, fused_weights
from gradient_quarantine.pairs import load_pairs
from gradient_quarantine.pocket import POCKET_DIR
from gradient_quarantine.problems import assign_modes, render_prompt
from gradient_quarantine.results import GRID_DIR
from gradient_quarantine.tokens import END_OF_TURN, encode_prompt
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from provenance import provenance, results_dir

BACKENDS = {"efficient+math": [SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH],
            "cudnn+efficient+math": [SDPBackend.CUDNN_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH],
            "flash": [SDPBackend.FLASH_ATTENTION], "efficient": [SDPBackend.EFFICIENT_ATTENTION],
            "cudnn": [SDPBackend.CUDNN_ATTENTION]}

DEV = torch.device("cuda")

def retries(): return torch.cuda.memory_stats().get("num_alloc_retries", 0) if DEV.type == "cuda" else 0

def update_prompts(tok, cfg, problems: int | None) -> list[list[int]]:
    ("The full preset's 64 x 4 rollout prompts, drawn as the trainer draws them (seed 0), "
     "from problems (the first PROBLEMS; all where None) whose prompts fit 1,024 tokens.")
    train_all, _ = train.load_substrate(cfg)
    fits = [p for p in train_all[:problems]
            if all(len(encode_prompt(tok, render_prompt(p, m))) <= 1024 for m in train.MODES)]
    modes, rng = assign_modes(fits, train.MODES, 0), random.Random(0)
    picks = [fits[rng.randrange(len(fits))] for _ in range(cfg.prompts_per_update)]
    return [encode_prompt(tok, render_prompt(p, modes[p.id])) for p in picks for _ in range(cfg.group_size)]

def prefill(model, tok, cfg, report, problems: int | None):
    prompts = sorted(update_prompts(tok, cfg, problems), key=len)
    half = len(prompts) // 2                                          # the full preset's: two chunks of 128 rows
    chunks = [prompts[:half], prompts[half:]]
    eot = tok.convert_tokens_to_ids(END_OF_TURN)
    with torch.no_grad(): weights = fused_weights(model)
    max_len = -(-(max(map(len, prompts)) + cfg.max_new_tokens - 1) // 128) * 128   # as the update's cache had it
    dec = StaticDecoder(model, weights, half, max_len, Sampling(0.7, 0.95, 20, cfg.max_new_tokens), eot,
                        tok.pad_token_id, kernel=True)
    report["prefill_setup"] = {"chunk_lengths": [max(map(len, c)) for c in chunks], "max_len": max_len,
                               "allocated_gib": gpu.peak_gib(DEV)}
    rows = report.setdefault("prefill", [])
    for rnd in range(2):
        for backend in ("efficient+math", "cudnn+efficient+math"):
            for k, chunk in enumerate(chunks):
                r0 = retries(); gpu.sync(DEV); t0 = time.perf_counter()
                with torch.no_grad(), sdpa_kernel(BACKENDS[backend]): dec.prefill(chunk)
                gpu.sync(DEV)
                rows.append({"round": rnd + 1, "backend": backend, "chunk": k + 1, "L": max(map(len, chunk)),
                             "s": round(time.perf_counter() - t0, 3), "alloc_retries": retries() - r0})
                gpu.log(rows[-1])
    with sdpa_kernel(BACKENDS["efficient+math"]):
        report["prefill_profile"] = gpu.kernel_table(
            lambda: dec.prefill(chunks[1]), DEV, top=12,
            total_label=f"all kernels ({len(chunks[1])} x {max(map(len, chunks[1]))} tokens)")

def whole_logprobs(model, b):
    "token_logprobs as it was before the chunked log-probabilities: the whole (B, T, V) logits in fp32."
    lp = (model(input_ids=b.input_ids).logits.float()[:, :-1].log_softmax(-1)
          .gather(-1, b.input_ids[:, 1:, None])[..., 0])
    return torch.cat([torch.zeros_like(lp[:, :1]), lp], 1)

LEARN_ROWS = [  # (name, SDPA backend, rollouts per micro-batch, prompt, completion, log-prob function)
    ("default SDPA, 2 x (587+1536)", "default", 2, 587, 1536, "chunked"),
    ("flash, 2 x (587+1536)", "flash", 2, 587, 1536, "chunked"),
    ("efficient, 2 x (587+1536)", "efficient", 2, 587, 1536, "chunked"),
    ("cudnn, 2 x (587+1536)", "cudnn", 2, 587, 1536, "chunked"),
    ("default SDPA, whole logits, 2 x (587+1536)", "default", 2, 587, 1536, "whole"),
    ("default SDPA, 2 x (905+1536)", "default", 2, 905, 1536, "chunked"),
    ("default SDPA, 4 x (905+1536)", "default", 4, 905, 1536, "chunked")]

def learning(model, report, steps: int, rounds: int, shape: tuple | None):
    "Each row of LEARN_ROWS, ROUNDS times in turn; SHAPE (prompt, completion) instead of the rows' own, if given."
    knobs, rows, i = model._knobs, report.setdefault("learn", []), 0
    for rnd in range(rounds):
        for name, backend, n, prompt, comp, lp in LEARN_ROWS:
            prompt, comp = shape or (prompt, comp)
            bs = [b.to(DEV) for b in learn_step.batches(model.config.vocab_size, n, prompt, comp, steps,
                                                        first=i * steps)]
            i += 1
            ctx = sdpa_kernel(BACKENDS[backend]) if backend != "default" else torch.enable_grad()
            try:
                with ctx: t = learn_step.time_steps(
                    model, knobs, bs, learn_step.token_logprobs if lp == "chunked" else whole_logprobs, DEV)
                r = {"round": rnd + 1, "name": name, **t, "s_per_rollout": round(t["s_per_batch"] / n, 4)}
            except Exception as e: r = {"round": rnd + 1, "name": name, "error": repr(e)[:200]}
            rows.append(r); gpu.log(r)
            gpu.free_memory(DEV)

def refresh(model, tok, report, pairs: int | None):
    "A direction read on the first PAIRS LeetCode-style pairs (all where None), two ways."
    knobs, pairs = model._knobs, load_pairs(tags=("leetcode-style",))[:pairs]
    pair_gradients(model, knobs, tok, pairs[:2], chunk=2)                        # warm-up
    out = {}
    for name, kw in (("2 per backward", dict(chunk=2)), ("token budget 6144", dict(chunk=16, max_tokens=6144))):
        gpu.sync(DEV); t0 = time.perf_counter()
        out[name] = pair_gradients(model, knobs, tok, pairs, **kw)
        gpu.sync(DEV)
        report.setdefault("refresh", {})[name] = round(time.perf_counter() - t0, 2)
    a, b = out.values()
    report["refresh"]["max_rel_diff"] = max(((a.hack[n] - b.hack[n]).norm() / a.hack[n].norm()).item()
                                            for n in knobs.names)
    report["refresh"]["peak_gib"] = gpu.peak_gib(DEV)
    gpu.log(report["refresh"])

def grading(report, n: int | None):
    ("Grading on this host's cores: five updates' worth of logged pocket rollouts (64 each), "
     "and the 119 canonical LeetCode solutions (the first N of each where N is given).")
    from gradient_quarantine.rewards import fenced, grade_many
    from gradient_quarantine.problems import load_leetcode
    pocket_train, _ = train.load_substrate(train.resolve_config("pocket"))
    logged = Path(__file__).parents[2]/GRID_DIR/"route2b_s43"/"rollouts.jsonl.gz"
    by_id, rows = {p.id: p for p in pocket_train}, train.read_jsonl(logged)
    out = report.setdefault("grading", {"cpus": os.cpu_count()})
    for u in (10,) if n else (10, 20, 30, 40, 50):
        rs = [r for r in rows if r["update"] == u][:n]
        t0 = time.perf_counter(); g = grade_many([(r["completion"], by_id[r["problem"]], r["mode"]) for r in rs])
        out[f"pocket update {u} ({len(rs)})"] = round(time.perf_counter() - t0, 2)
        if [x.reward for x in g] != [r["reward"] for r in rs]:
            report["errors"].append(f"pocket update {u}: rewards differ from the log")
    test = load_leetcode("test")
    modes = assign_modes(test, train.MODES, 0)
    test = test[:n]
    t0 = time.perf_counter(); g = grade_many([(fenced(p.canonical_solution), p, modes[p.id]) for p in test])
    out[f"{len(test)} LeetCode canonicals"] = round(time.perf_counter() - t0, 2)
    if not all(x.gt_correct for x in g): report["errors"].append("a canonical LeetCode solution failed")
    gpu.log(out)

def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=None, help="folder for gpu_diag.json (default: beside this script)")
    ap.add_argument("--steps", type=int, default=6, help="learning micro-batches per row")
    ap.add_argument("--smoke", action="store_true",
                    help="a tiny fp32 model on CPU, every backend the math one, tiny sizes: checks the script")
    a = ap.parse_args()
    out = results_dir(a.out, a.smoke, __file__)
    global DEV
    if a.smoke:
        DEV, a.steps = torch.device("cpu"), 1
        for k in BACKENDS: BACKENDS[k] = [SDPBackend.MATH]
    dev, n = DEV, (2 if a.smoke else None)
    tok = AutoTokenizer.from_pretrained(POCKET_DIR)
    model = gpu.build({**gpu.TINY, "vocab_size": len(tok)} if a.smoke else gpu.QWEN3_4B,
                      torch.float32 if a.smoke else torch.bfloat16, dev, knobs=True)
    fuse_rms_norms(model)
    cfg = train.resolve_config("full", **({"prompts_per_update": 2, "max_new_tokens": 8} if a.smoke else {}))
    report = {"provenance": provenance(), "smoke": a.smoke,
              "env": {"device": torch.cuda.get_device_name(dev) if dev.type == "cuda" else "CPU (smoke)",
                      "torch": torch.__version__, "transformers": transformers.__version__,
                      "python": platform.python_version(), "cudnn": torch.backends.cudnn.version()}, "errors": []}
    out.mkdir(parents=True, exist_ok=True)
    for part in (lambda: grading(report, n), lambda: prefill(model, tok, cfg, report, 16 if a.smoke else None),
                 lambda: learning(model, report, a.steps, 1 if a.smoke else 2, (24, 8) if a.smoke else None),
                 lambda: refresh(model, tok, report, 4 if a.smoke else None)):
        gpu.free_memory(dev)
        try: part()
        except Exception as e: report["errors"].append(repr(e)[:300]); traceback.print_exc()
        report["seconds"] = round(time.perf_counter() - gpu.T0)
        (out/"gpu_diag.json").write_text(json.dumps(report, indent=1) + "\n")
    for r in report.get("prefill", []): print("prefill", r)
    for r in report.get("learn", []): print("learn", r)
    print("refresh", report.get("refresh")); print("grading", report.get("grading"))
    for r in report.get("prefill_profile") or []: print("prefill profile", r)
    print("errors", report["errors"], "seconds", report["seconds"], flush=True)
    if dev.type == "cpu":
        print("on the CPU: the prefill's alloc_retries are 0 and the refresh's peak_gib is None (CUDA's allocator "
              "statistics); the profiles are CPU time by operator, not CUDA kernels")
    # a learning row's error is a result on a GPU (a backend that cannot run); a smoke runs the math backend only
    if report["errors"] or a.smoke and any("error" in r for r in report.get("learn", [])): sys.exit(1)

if __name__ == "__main__": main()
