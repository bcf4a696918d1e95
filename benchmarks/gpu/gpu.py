"""Decode speed of plain `generate` and `fast_generate` on a random Qwen3-4B with knobs,
against the memory-bandwidth floor (one H100).

On the GPU machine, from the repository root (about 3-5 minutes; partial results are written after every measurement):
    export PYTHONPATH=$PWD; python benchmarks/gpu/gpu.py --out benchmarks/gpu/
A smoke, a tiny fp32 Qwen3 of the same architecture, to check the script (on CPU, in seconds: one batch of 2 rows,
8 new tokens) or the CUDA-graph path (--device cuda):
    python benchmarks/gpu/gpu.py --smoke [--device cuda] [--out DIR]
On the CPU a smoke leaves empty what needs CUDA: the SDPA-attention timing and its graphs (`fast, SDPA attention`,
`SDPA graphs`, `SDPA capture s`: timed on CUDA only), the peak memory (`fast peak GiB`: CUDA's allocator statistics),
graph captures (0: no CUDA graphs) and the decode-attention kernel check (a Triton kernel).
--eager runs fast_generate without CUDA graphs (to tell a capture failure from the rest).
Writes gpu.json and gpu.md to --out (default: beside this script; a smoke: a temporary folder). Exits 1 if a check or
a measurement failed (after writing what it has).
"""
import argparse, gc, json, math, platform, sys, time, traceback
from collections import Counter
from pathlib import Path
import torch
import transformers
from transformers import AutoModelForCausalLM, Qwen3Config
from transformers.generation.logits_process import TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper
from transformers.generation.stopping_criteria import StoppingCriteria, StoppingCriteriaList
from gradient_quarantine import adapter
from gradient_quarantine.evaluate import Sampling, generate
from gradient_quarantine.fastgen import TokenIds, decode_attention, fast_generate, sample_next
from gradient_quarantine.train import PRESET_VALUES
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from provenance import footer, provenance, results_dir

QWEN3_4B = dict(hidden_size=2560, intermediate_size=9728, num_hidden_layers=36, num_attention_heads=32,
                num_key_value_heads=8, head_dim=128, vocab_size=151936, max_position_embeddings=40960,
                tie_word_embeddings=True, rms_norm_eps=1e-6,
                rope_parameters={"rope_type": "default", "rope_theta": 1000000.0})
TINY = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
            head_dim=16, vocab_size=1024, max_position_embeddings=4096, tie_word_embeddings=True, rms_norm_eps=1e-6,
            rope_parameters={"rope_type": "default", "rope_theta": 1000000.0})      # a smoke's: Qwen3 at toy sizes
FULL = PRESET_VALUES["full"]
# the full preset's rollouts
ROLLOUT = Sampling(temperature=FULL["temperature"], top_p=FULL["top_p"], top_k=FULL["top_k"])
GRAPHS = None   # fast_generate's default (graphs on CUDA); --eager: off
T0 = time.perf_counter()
GiB = 2 ** 30

def log(*a): print(f"[{time.perf_counter() - T0:6.1f}s]", *a, flush=True)

def sync(dev):
    if dev.type == "cuda": torch.cuda.synchronize()

def free_memory(dev):
    gc.collect()
    if dev.type == "cuda": torch.cuda.empty_cache(); torch.cuda.reset_peak_memory_stats()

def fits(dev, need: float) -> bool:
    "Whether `need` bytes fit in the free device memory (always on CPU)."
    return dev.type != "cuda" or need < torch.cuda.mem_get_info()[0]

def peak_gib(dev): return round(torch.cuda.max_memory_allocated() / GiB, 1) if dev.type == "cuda" else None

def copy_bandwidth(dev, nbytes: int, reps: int = 20) -> float:
    "Device-to-device copy bandwidth in bytes/s: (bytes read + bytes written) / time."
    x = torch.empty(nbytes, dtype=torch.uint8, device=dev); y = torch.empty_like(x)
    y.copy_(x); sync(dev)
    t0 = time.perf_counter()
    for _ in range(reps): y.copy_(x)
    sync(dev)
    return 2 * nbytes * reps / (time.perf_counter() - t0)

def random_basis(weight, *, cache=True):
    ("Stands in for adapter.svd_basis (an fp32 SVD of 252 matrices takes minutes): random U (d_out, r), Vh (r, d_in); "
     "the cost depends on shapes only.")
    d_out, d_in = weight.shape
    r = min(d_out, d_in)
    return (torch.randn(d_out, r, device=weight.device) / d_out ** 0.5,
            torch.randn(r, d_in, device=weight.device) / d_in ** 0.5, f"random {d_out}x{d_in}")

def build(arch: dict, dtype, dev, *, knobs: bool, seed: int = 0):
    "A randomly initialised Qwen3 from `arch` on `dev`, with both knobs attached and set to small random values."
    torch.manual_seed(seed)
    with torch.device(dev): model = AutoModelForCausalLM.from_config(Qwen3Config(**arch), dtype=dtype)
    model = model.to(dev).eval()
    if knobs:
        svd_basis, adapter.svd_basis = adapter.svd_basis, random_basis
        try: k = adapter.attach_knobs(model, model_id="random-qwen3", svd_cache=False)
        finally: adapter.svd_basis = svd_basis
        with torch.no_grad():
            for p in k.parameters(): p.normal_(0, 0.02)
    return model

def weight_bytes(model) -> int:
    ("Bytes a fast decode step must read in full: the layers' weights (knobs merged into them), "
     "the final norm and lm_head; not the knob bases.")
    seen, total = set(), 0
    for mod in (model.model.layers, model.model.norm, model.lm_head):
        for name, t in mod.named_parameters():
            if name.endswith(("deployed", "quarantine")) or t.data_ptr() in seen: continue
            seen.add(t.data_ptr()); total += t.numel() * t.element_size()
    return total

def basis_bytes(model) -> int:
    "Bytes of the knob bases U and Vh: what an unmerged knob layer reads on top of its weight."
    return sum(b.numel() * b.element_size() for n, b in model.named_buffers() if n.endswith((".U", ".Vh")))

def kv_bytes(cfg, batch: int, ctx: float, elem: int) -> float:
    return 2 * cfg.num_hidden_layers * batch * cfg.num_key_value_heads * ctx * cfg.head_dim * elem

def random_prompts(n: int, length: int, vocab: int, seed: int) -> list[list[int]]:
    return torch.randint(0, vocab, (n, length), generator=torch.Generator().manual_seed(seed)).tolist()

# ---------------------------------------------------------------- checks
def check_small(dev) -> dict:
    "fp32 tiny Qwen3 (4 query / 2 KV heads) with knobs on `dev`: fast (graphs on CUDA) vs plain, greedy and sampled."
    model = adapter.tiny_qwen3(vocab_size=97, seed=1, hidden_size=64, layers=2, initializer_range=0.4).to(dev)
    knobs = adapter.attach_knobs(model, svd_cache=False)
    with torch.no_grad():
        for p in knobs.parameters(): p.normal_(0, 0.2)
    g = torch.Generator().manual_seed(2)
    prompts = [torch.randint(2, 97, (n,), generator=g).tolist() for n in (3, 17, 9, 30, 1, 12)]
    greedy = Sampling(temperature=0, max_new_tokens=64)
    plain = generate(model, TokenIds(eot=97), prompts, greedy, batch_size=4)
    fast = fast_generate(model, TokenIds(eot=97), prompts, greedy, batch_size=4, bucket=16, check_every=4,
                         graphs=GRAPHS)
    first = [c[:40] for c in fast]
    rows_with = Counter(t for c in first for t in set(c))
    eot = max((t for t, n in rows_with.items() if n < len(first)), key=lambda t: (rows_with[t], -t))
    cap = Sampling(temperature=0, max_new_tokens=40)
    stopped = fast_generate(model, TokenIds(eot=eot), prompts, cap, batch_size=4, bucket=16, check_every=4,
                            graphs=GRAPHS)
    out = {"greedy_tokens": sum(map(len, plain)),
           "greedy_mismatches": sum(a != b for p, f in zip(plain, fast) for a, b in zip(p, f))
                                + sum(abs(len(p) - len(f)) for p, f in zip(plain, fast)),
           "stopping_equal": stopped == generate(model, TokenIds(eot=eot), prompts, cap, batch_size=4),
           "stopped_rows": sum(c[-1] == eot for c in stopped), "rows": len(stopped)}
    V, N, prompt = 16, 4000, [5, 9, 3, 12, 7]
    small = adapter.tiny_qwen3(vocab_size=V, seed=5, hidden_size=32, layers=2, initializer_range=0.3).to(dev)
    with torch.no_grad():
        for p in adapter.attach_knobs(small, svd_cache=False).parameters(): p.normal_(0, 0.2)
    def target(prefix, s):
        with torch.no_grad():
            z = small(input_ids=torch.tensor([prompt + prefix], device=dev)).logits[:, -1].float().cpu()
        z = TemperatureLogitsWarper(s.temperature)(None, z)
        if s.top_k: z = TopKLogitsWarper(s.top_k)(None, z)
        if s.top_p < 1: z = TopPLogitsWarper(s.top_p)(None, z)
        return z.softmax(-1)[0]
    def tv(tokens, p):
        n, K = len(tokens), int((p > 0).sum())
        emp = torch.bincount(torch.tensor(tokens), minlength=V) / n
        return {"n": n, "tv": round(0.5 * (emp - p).abs().sum().item(), 4),
                "bound": round(0.5 * ((K - 1) / n) ** 0.5 + (math.log(1e4) / (2 * n)) ** 0.5, 4),
                "outside": emp[p == 0].sum().item()}
    for s in (Sampling(1.0, 0.8, 0, 3), Sampling(0.7, 1.0, 5, 3), Sampling(0.7, 0.9, 8, 3)):
        torch.manual_seed(0)
        # token 3 comes from a replayed graph on CUDA
        outs = fast_generate(small, TokenIds(eot=1), [prompt] * N, s, batch_size=N, graphs=GRAPHS)
        pre = Counter(tuple(o[:2]) for o in outs if len(o) == 3).most_common(1)[0][0]
        out[f"T{s.temperature} p{s.top_p} k{s.top_k}"] = {
            "first": tv([o[0] for o in outs], target([], s)),
            "third": tv([o[2] for o in outs if len(o) == 3 and tuple(o[:2]) == pre], target(list(pre), s))}
    return out

def check_kernel(dev, dtype) -> dict:
    ("decode_attention against masked SDPA at Qwen3-4B's head shapes (32 query / 8 KV heads, head dim 128), "
     "per-row first slots.")
    g = torch.Generator(device=dev).manual_seed(0)
    b, H, Hkv, S, hd = 16, 32, 8, 1200, 128
    q = torch.randn(b, H, hd, generator=g, device=dev, dtype=dtype)
    k, v = (torch.randn(b, Hkv, S, hd, generator=g, device=dev, dtype=dtype) for _ in range(2))
    first = torch.randint(0, 600, (b,), generator=g, device=dev)
    out = {}
    for last in (700, 1100):
        allowed = (torch.arange(S, device=dev)[None] >= first[:, None]) & (torch.arange(S, device=dev)[None] <= last)
        ref = torch.nn.functional.scaled_dot_product_attention(
            q[:, :, None].float(), k.repeat_interleave(H // Hkv, 1).float(), v.repeat_interleave(H // Hkv, 1).float(),
            attn_mask=allowed[:, None, None], scale=hd ** -0.5)[:, :, 0]
        got = decode_attention(q, k, v, first, torch.tensor([last], device=dev), hd ** -0.5).float()
        out[f"last {last}"] = round((got - ref).abs().max().item(), 5)
    return {"dtype": str(dtype), "max_abs_error": out}

def kernel_table(run, dev, *, top: int, total_label: str = "all kernels", digits: int = 3) -> list[dict]:
    ("Run `run()` once under the profiler: time by CUDA kernel (on CPU: self time by op), the `top` largest rows "
     "and a total row.")
    from torch.profiler import ProfilerActivity, profile
    cuda = dev.type == "cuda"
    with profile(activities=[ProfilerActivity.CUDA if cuda else ProfilerActivity.CPU]) as prof:
        run(); sync(dev)
    us = (lambda e: e.device_time_total) if cuda else (lambda e: e.self_cpu_time_total)
    ev = sorted(prof.key_averages(), key=lambda e: -us(e))
    total = sum(map(us, ev))
    return [{"kernel": e.key[:90], "calls": e.count, "ms": round(us(e) / 1e3, digits),
             "share": round(us(e) / total, 3)} for e in ev[:top]] + [
        {"kernel": total_label, "calls": sum(e.count for e in ev), "ms": round(total / 1e3, digits), "share": 1.0}]

def profile_prefill(model, dev, batch: int, length: int, top: int = 10) -> list[dict]:
    "CUDA time by kernel of one fast prefill of `batch` prompts of `length` tokens."
    from gradient_quarantine.fastgen import StaticDecoder, fused_weights
    V = model.config.vocab_size
    with torch.no_grad():
        dec = StaticDecoder(model, fused_weights(model), batch, length + 16, ROLLOUT, V, 0, kernel=True)
        prompts = random_prompts(batch, length, V, seed=2)
        dec.prefill(prompts); sync(dev)
        t0 = time.perf_counter(); dec.prefill(prompts); sync(dev); wall = time.perf_counter() - t0
        return kernel_table(lambda: dec.prefill(prompts), dev, top=top,
                            total_label=f"all kernels (wall {wall:.2f} s for {batch} x {length} tokens)")

def teacher_forced(model, dev, prompts, comps) -> dict:
    ("Each generated token against a full-sequence forward of prompt + completion: argmax agreement "
     "and regret (max logit - its logit).")
    agree = total = 0; regret = 0.0
    with torch.no_grad():
        for p, c in zip(prompts, comps):
            logits = model(input_ids=torch.tensor([p + c], device=dev)).logits[0, len(p) - 1:-1].float()   # (len(c), V)
            ids = torch.tensor(c, device=dev)
            agree += (logits.argmax(-1) == ids).sum().item(); total += len(c)
            regret = max(regret, (logits.max(-1).values - logits.gather(-1, ids[:, None])[:, 0]).max().item())
    return {"agree": round(agree / total, 4), "max_regret": round(regret, 4), "tokens": total}

def check_big(model, dev, bucket: int) -> dict:
    ("Greedy on the benchmark model (bf16 on GPU) across buckets of 16 slots: fast and plain, "
     "each against a teacher-forced forward.")
    V = model.config.vocab_size
    prompts = [random_prompts(1, n, V, seed=10 + n)[0] for n in (37, 100, 180, 260)]
    greedy, tok = Sampling(temperature=0, max_new_tokens=48), TokenIds(eot=V)
    fast = fast_generate(model, tok, prompts, greedy, batch_size=4, bucket=bucket, graphs=GRAPHS)
    plain = generate(model, tok, prompts, greedy, batch_size=4)
    return {"fast": teacher_forced(model, dev, prompts, fast), "plain": teacher_forced(model, dev, prompts, plain),
            "fast_equals_plain": sum(f == p for f, p in zip(fast, plain)), "rows": len(prompts)}

def check_fp32(dev, layers: int = 4, new: int = 64) -> dict:
    ("fp32, the Qwen3-4B layer shapes and vocabulary with `layers` layers and knobs moved off zero: "
     "greedy fast vs plain, token for token.")
    model = build({**QWEN3_4B, "num_hidden_layers": layers}, torch.float32, dev, knobs=True, seed=3)
    V = model.config.vocab_size
    prompts = [random_prompts(1, n, V, seed=20 + n)[0] for n in (12, 75, 160, 333)]
    greedy, tok = Sampling(temperature=0, max_new_tokens=new), TokenIds(eot=V)
    fast = fast_generate(model, tok, prompts, greedy, batch_size=4, bucket=64, graphs=GRAPHS)
    plain = generate(model, tok, prompts, greedy, batch_size=4)
    first = [next((j for j, (a, b) in enumerate(zip(f, p)) if a != b), len(f)) for f, p in zip(fast, plain)]
    return {"layers": layers, "rows": len(prompts), "new": new, "equal_rows": sum(f == p for f, p in zip(fast, plain)),
            "first_mismatch": first, "fast_vs_forward": teacher_forced(model, dev, prompts, fast)}

def profile_step(model, dev, batch: int, ctx: int, top: int = 14) -> list[dict]:
    "CUDA time by kernel of one eager fast decode step at `batch` rows and `ctx` cache slots."
    from gradient_quarantine.fastgen import StaticDecoder, fused_weights
    V = model.config.vocab_size
    with torch.no_grad():
        dec = StaticDecoder(model, fused_weights(model), batch, ctx + 16, ROLLOUT, V, 0, kernel=True)
        dec.prefill(random_prompts(batch, ctx, V, seed=1)); dec.decode(ctx + 16); sync(dev)
        return kernel_table(lambda: dec.decode(ctx + 16), dev, top=top)

# ---------------------------------------------------------------- timings
def time_fast(model, dev, batch, prompt, new, bucket, attention=None) -> dict:
    ("ms per replayed decode step of fast_generate, its default attention (the kernel on CUDA) or SDPA in buckets "
     "(attention='sdpa': columns prefixed sdpa_).")
    V = model.config.vocab_size
    prompts = random_prompts(batch, prompt, V, seed=batch + new)
    tok, s = TokenIds(eot=V), Sampling(ROLLOUT.temperature, ROLLOUT.top_p, ROLLOUT.top_k, new)
    fast_generate(model, tok, prompts[:4], Sampling(s.temperature, s.top_p, s.top_k, 2), bucket=bucket, graphs=GRAPHS,
                  attention=attention)   # warm-up
    free_memory(dev)
    stats, t0 = {}, time.perf_counter()
    out = fast_generate(model, tok, prompts, s, batch_size=batch, bucket=bucket, stats=stats, graphs=GRAPHS,
                        attention=attention)
    total = time.perf_counter() - t0
    assert all(len(o) == new for o in out), "a row stopped early: the end-of-turn id must be outside the vocabulary"
    replays = stats["decode_steps"] - stats["captures"]
    ms = 1e3 * (stats["decode_s"] - stats["capture_s"]) / replays if replays else float("nan")
    if attention == "sdpa": return {"sdpa_ms": round(ms, 2), "sdpa_graphs": stats["captures"],
                                    "sdpa_capture_s": round(stats["capture_s"], 2)}
    return {"fast_ms": round(ms, 2), "fast_tok_s": round(batch * 1e3 / ms) if replays else None,
            "fast_prefill_s": round(stats["prefill_s"], 2), "chunk_rows": stats["chunk_rows"],
            "fuse_s": round(stats["fuse_s"], 2), "graphs": stats["captures"], "capture_s": round(stats["capture_s"], 2),
            "fast_total_s": round(total, 2), "fast_peak_gib": peak_gib(dev)}

class StepClock(StoppingCriteria):
    "Never stops generation: records the time after each step of `model.generate`, after a device sync."
    def __init__(self, dev): self.dev, self.times = dev, []
    def __call__(self, input_ids, scores, **kwargs):
        sync(self.dev); self.times.append(time.perf_counter())
        return torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)

def time_plain(model, dev, batch, ctx, steps) -> dict:
    ("ms per decode step of plain generation at context ~ctx: evaluate.generate's model.generate call, "
     "timed step by step over `steps`.")
    V = model.config.vocab_size
    # (batch, prompt): no padding
    ids = torch.tensor(random_prompts(batch, max(1, round(ctx - steps / 2)), V, seed=batch), device=dev)
    def run(ids, new, clock=None):
        with torch.no_grad():
            model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=new, do_sample=True,
                           temperature=ROLLOUT.temperature, top_p=ROLLOUT.top_p, top_k=ROLLOUT.top_k, eos_token_id=V,
                           pad_token_id=0, stopping_criteria=StoppingCriteriaList([clock] if clock else []))
    run(ids[:4], 2)              # warm-up
    clock = StepClock(dev)
    run(ids, 1 + steps, clock)   # clock.times[0]: after the prefill's token
    return {"plain_ms": round(1e3 * (clock.times[-1] - clock.times[0]) / (len(clock.times) - 1), 2),
            "plain_prompt": ids.shape[1], "plain_steps": len(clock.times) - 1, "plain_peak_gib": peak_gib(dev)}

def time_sampling(dev, batch, V, dtype, reps=5) -> float:
    ("ms of one eager sample_next (temperature, top-k candidates on CUDA, top-p, draw) on (batch, V) logits "
     "in the model's dtype.")
    logits = torch.randn(batch, V, device=dev, dtype=dtype)
    sample_next(logits, ROLLOUT); sync(dev)
    t0 = time.perf_counter()
    for _ in range(reps): sample_next(logits, ROLLOUT)
    sync(dev)
    return round(1e3 * (time.perf_counter() - t0) / reps, 2)

# ---------------------------------------------------------------- report
def failed(report: dict, what: str, e: Exception) -> str:
    "Note a failure in REPORT's errors (the script then exits 1) and print its traceback; the text for the table."
    traceback.print_exc()
    report["errors"].append(f"{what}: {e!r}"[:300])
    return f"{what} FAILED: {e!r}"

COLS = [("batch", "batch"), ("prompt", "prompt"), ("new", "new"), ("ctx", "mean ctx"), ("plain_ms", "plain ms/step"),
        ("fast_ms", "fast ms/step"), ("sdpa_ms", "fast, SDPA attention ms/step"), ("fast_tok_s", "fast tok/s"),
        ("floor_ms", "floor ms/step"), ("fast_over_floor", "fast / floor"), ("plain_over_fast", "plain / fast"),
        ("sampling_ms", "sampling ms"), ("fast_prefill_s", "fast prefill s"), ("graphs", "graphs"),
        ("capture_s", "capture s"), ("sdpa_graphs", "SDPA graphs"), ("sdpa_capture_s", "SDPA capture s"),
        ("chunk_rows", "rows per chunk"), ("fuse_s", "fuse s"), ("fast_peak_gib", "fast peak GiB"), ("note", "note")]

def checks_text(checks: dict) -> str:
    "The checks as a few lines of markdown."
    lines = []
    if isinstance(small := checks.get("small"), dict):
        tvs = "; ".join(f"{k}: first {v['first']['tv']} (bound {v['first']['bound']}, n {v['first']['n']}), "
                        f"third {v['third']['tv']} (bound {v['third']['bound']}, n {v['third']['n']}), "
                        f"outside the support {v['first']['outside'] + v['third']['outside']}"
                        for k, v in small.items() if isinstance(v, dict))
        lines += [f"- tiny fp32 Qwen3 with knobs, greedy: {small['greedy_mismatches']} mismatches in "
                  f"{small['greedy_tokens']} tokens vs plain; with stopping equal to plain: {small['stopping_equal']} "
                  f"({small['stopped_rows']}/{small['rows']} rows stopped)",
                  f"- sampled token TV vs HF's warpers: {tvs}"]
    elif small: lines.append(f"- tiny-model checks: {small}")
    if isinstance(big := checks.get("big"), dict):
        lines.append(f"- benchmark model, greedy 48 tokens x {big['rows']} rows, "
                     f"each token vs a teacher-forced full forward: fast agrees {big['fast']['agree']} "
                     f"(max regret {big['fast']['max_regret']} logits), plain agrees {big['plain']['agree']} "
                     f"(max regret {big['plain']['max_regret']}); completions identical to plain: "
                     f"{big['fast_equals_plain']}/{big['rows']}")
    elif big: lines.append(f"- benchmark-model checks: {big}")
    if isinstance(f32 := checks.get("fp32"), dict):
        lines.append(f"- fp32, Qwen3-4B layer shapes and vocabulary, {f32['layers']} layers, knobs moved off zero, "
                     f"greedy {f32['new']} tokens x {f32['rows']} rows: fast equals plain `generate` in "
                     f"{f32['equal_rows']}/{f32['rows']} rows (first mismatch at {f32['first_mismatch']}; "
                     f"{f32['new']} = none); fast vs a teacher-forced forward: "
                     f"agrees {f32['fast_vs_forward']['agree']}")
    elif f32: lines.append(f"- fp32 check: {f32}")
    if isinstance(kern := checks.get("kernel"), dict):
        lines.append(f"- decode attention kernel vs masked SDPA (fp32 reference), {kern['dtype']}, 16 rows, "
                     f"32 query / 8 KV heads, head dim 128, first slots 0-599: max abs error {kern['max_abs_error']}")
    elif kern: lines.append(f"- kernel check: {kern}")
    return "\n".join(lines)

def profile_text(prof, title: str, what: str) -> str:
    if not prof: return ""
    if isinstance(prof, str): return f"\n\n## {title}\n\n{prof}\n"
    return (f"\n\n## {title}\n\n{what}, CUDA time by kernel:\n\n| kernel | calls | ms | share |\n|---|---|---|---|\n"
            + "\n".join(f"| `{r['kernel']}` | {r['calls']} | {r['ms']} | {r['share']} |" for r in prof) + "\n")

CPU_EMPTY = ("fast, SDPA attention ms/step, SDPA graphs and SDPA capture s (timed on CUDA only), fast peak GiB "
             "(CUDA's allocator statistics); graphs and capture s are 0 (no CUDA graphs), and the decode-attention "
             "kernel check does not run (a Triton kernel)")

def write(out: Path, report: dict):
    out.mkdir(parents=True, exist_ok=True)
    (out/"gpu.json").write_text(json.dumps(report, indent=1) + "\n")
    rows = report["rows"]
    table = "| " + " | ".join(h for _, h in COLS) + " |\n|" + "---|" * len(COLS) + "\n" + "\n".join(
        "| " + " | ".join("" if r.get(k) is None else str(r[k]) for k, _ in COLS) + " |" for r in rows)
    e = report["env"]
    profiles = (profile_text(report.get("profile"), "Where one step's time goes",
                             "One eager fast decode step (no graph)")
                + profile_text(report.get("profile_prefill"), "Where a prefill goes",
                               "One fast prefill of 128 prompts of 640 tokens"))
    text = (f"# fast_generate vs plain generate: decode on {e['device_name']}\n\n"
            f"Random {e['arch']} ({e['dtype']}, CUDA graphs {'on' if e['graphs'] else 'off'}, knobs attached "
            f"with random bases and small random values), sampling {e['sampling']}, "
            f"end-of-turn outside the vocabulary (every row runs the full length).\n\n{table}\n\n"
            f"- **fast ms/step**: decode time over replayed steps, i.e. without the prefill and without the eager step "
            f"+ capture of each graph (those are `capture s`). The decode attention kernel reads each row's own slots: "
            f"one graph per chunk size.\n"
            f"- **fast, SDPA attention**: the same generator with `attention='sdpa'` (masked SDPA over the "
            f"first S slots, S in buckets of {e['bucket']}: one graph per bucket), timed side by side in this run.\n"
            f"- **plain ms/step**: HF `model.generate` called as `evaluate.generate` calls it, timed step by step "
            f"(a stopping criterion that syncs and reads the clock) over its first {e['plain_steps']} decode steps "
            f"only, from a prompt of mean ctx - {e['plain_steps']}/2 tokens, to keep the run short.\n"
            f"- **floor**: (bytes a step must read: {e.get('weight_gib')} GiB of weights, knobs merged into them, "
            f"+ the K/V of the mean context) / the measured copy bandwidth {e['copy_gb_s']} GB/s "
            f"(bytes read + written per second of a {e['copy_gib']} GiB device copy). The knob bases "
            f"({e.get('basis_gib')} GiB), which plain `generate` reads at every step through the knob layers, "
            f"are not counted.\n"
            f"- **sampling ms**: one eager `sample_next` on (batch, vocab) logits in the model's dtype "
            f"(temperature, top-k candidates, top-p, draw): part of each fast step.\n\n"
            f"## Checks\n\n{checks_text(report['checks'])}{profiles}\n\n"
            f"torch {e['torch']}, transformers {e['transformers']}, Python {e['python']}; "
            f"{e['seconds']:.0f} s in all.\n"
            + (f"\nOn the CPU, empty: {CPU_EMPTY}.\n" if e["device_name"].startswith("CPU") else "")
            + (f"\nFailed: {'; '.join(report['errors'])}\n" if report.get("errors") else "")
            + f"\n{footer(report['provenance'])}\n")
    (out/"gpu.md").write_text(text)

def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=None, help="folder for gpu.json and gpu.md (default: beside this script)")
    ap.add_argument("--smoke", action="store_true",
                    help="tiny fp32 model, on CPU unless --device cuda: checks the script, or the graph path on a GPU")
    ap.add_argument("--device", default=None, help="default: cuda when available (cpu with --smoke)")
    ap.add_argument("--batches", type=int, nargs="+", default=None, help="default 64 256 (smoke: 2)")
    ap.add_argument("--new", type=int, nargs="+", default=None, help="new tokens, default 256 1536 (smoke: 8)")
    ap.add_argument("--prompt", type=int, default=None, help="prompt tokens, default 512 (smoke: 16)")
    ap.add_argument("--plain-steps", type=int, default=None,
                    help="decode steps timed for plain generate, default 32 (smoke: 4)")
    ap.add_argument("--bucket", type=int, default=None,
                    help="fast_generate's attended-length bucket, default 128 (smoke: 16)")
    ap.add_argument("--eager", action="store_true",
                    help="fast_generate without CUDA graphs (to diagnose a capture failure)")
    ap.add_argument("--profile", action="store_true",
                    help="add a by-kernel profile of one eager decode step at the largest batch")
    ap.add_argument("--budget", type=float, default=420, help="seconds after which remaining measurements are skipped")
    ap.add_argument("--no-sdpa", action="store_true",
                    help="skip the side-by-side timing of fast_generate with SDPA attention in buckets")
    a = ap.parse_args()
    global GRAPHS
    GRAPHS, q = (False if a.eager else None), a.smoke
    dev = torch.device(a.device or ("cpu" if q or not torch.cuda.is_available() else "cuda"))
    batches, news = a.batches or ([2] if q else [64, 256]), a.new or ([8] if q else [256, 1536])
    prompt, steps = a.prompt or (16 if q else 512), a.plain_steps or (4 if q else 32)
    bucket = a.bucket or (16 if q else 128)
    dtype = torch.float32 if q or dev.type == "cpu" else torch.bfloat16
    arch = TINY if q else QWEN3_4B
    out = results_dir(a.out, q, __file__)
    log(f"device {dev}, {'tiny' if q else 'Qwen3-4B'} config, dtype {dtype}")
    env = {"device_name": torch.cuda.get_device_name(dev) if dev.type == "cuda"
                          else f"CPU ({torch.get_num_threads()} threads)",
           "arch": "tiny Qwen3 (smoke)" if q else "Qwen3-4B configuration", "arch_config": arch, "dtype": str(dtype),
           "bucket": bucket, "graphs": not a.eager and dev.type == "cuda",
           "sampling": f"T={ROLLOUT.temperature}, top_p={ROLLOUT.top_p}, top_k={ROLLOUT.top_k}", "plain_steps": steps,
           "torch": torch.__version__, "transformers": transformers.__version__, "python": platform.python_version()}
    report = {"provenance": provenance(), "smoke": q, "env": env, "checks": {}, "rows": [], "errors": []}

    copy_gib = 0.25 if q or dev.type == "cpu" else 2
    bw = copy_bandwidth(dev, int(copy_gib * GiB))
    env.update(copy_gib=copy_gib, copy_gb_s=round(bw / 1e9, 1))
    log(f"copy bandwidth {bw / 1e9:.0f} GB/s")
    free_memory(dev)

    try: report["checks"]["small"] = check_small(dev)
    except Exception as e: report["checks"]["small"] = failed(report, "small check", e)
    log("small-model checks", report["checks"]["small"])
    write(out, {**report, "env": {**env, "seconds": time.perf_counter() - T0}})

    if dev.type == "cuda":
        try: report["checks"]["kernel"] = check_kernel(dev, dtype)
        except Exception as e: report["checks"]["kernel"] = failed(report, "kernel check", e)
        log("kernel check", report["checks"]["kernel"])
    if not q and dev.type == "cuda":
        try: report["checks"]["fp32"] = check_fp32(dev)
        except Exception as e: report["checks"]["fp32"] = failed(report, "fp32 check", e)
        log("fp32 check", report["checks"]["fp32"]); free_memory(dev)

    model = build(arch, dtype, dev, knobs=True)
    cfg, elem = model.config, torch.finfo(dtype).bits // 8
    wb = weight_bytes(model)
    env.update(weight_gib=round(wb / GiB, 3), parameters=sum(p.numel() for p in model.parameters()))
    env.update(basis_gib=round(basis_bytes(model) / GiB, 3))
    log(f"model built: {wb / GiB:.2f} GiB of weights read per step; "
        f"knob bases {env['basis_gib']} GiB (not read: merged)")
    try: report["checks"]["big"] = check_big(model, dev, bucket=16)
    except Exception as e: report["checks"]["big"] = failed(report, "big check", e)
    log("benchmark-model checks", report["checks"]["big"])
    free_memory(dev)
    if a.profile:
        try: report["profile"] = profile_step(model, dev, batches[-1], prompt + news[0] // 2)
        except Exception as e: report["profile"] = failed(report, "profile", e)
        log("profile", report["profile"]); free_memory(dev)
        try: report["profile_prefill"] = profile_prefill(model, dev, 128, 640)
        except Exception as e: report["profile_prefill"] = failed(report, "profile_prefill", e)
        log("prefill profile", report["profile_prefill"]); free_memory(dev)

    for new in news:
        for batch in batches:
            ctx = prompt + new / 2
            row = {"batch": batch, "prompt": prompt, "new": new, "ctx": round(ctx),
                   "floor_ms": round(1e3 * (wb + kv_bytes(cfg, batch, ctx, elem)) / bw, 3)}
            notes = []
            if time.perf_counter() - T0 > a.budget: notes.append("skipped: time budget")
            else:
                try: row["sampling_ms"] = time_sampling(dev, batch, cfg.vocab_size, dtype)
                except Exception as e: notes.append(failed(report, "sampling", e)[:200])
                max_len = -(-(prompt + new - 1) // bucket) * bucket
                need = kv_bytes(cfg, batch, max_len, elem) + 2 * GiB + 24 * batch * cfg.vocab_size
                free_memory(dev)
                if not fits(dev, need): notes.append(
                    f"fast skipped: KV cache {kv_bytes(cfg, batch, max_len, elem) / GiB:.0f} GiB does not fit")
                else:
                    log(f"fast   batch {batch} new {new} ...")
                    try: row.update(time_fast(model, dev, batch, prompt, new, bucket))
                    except Exception as e: notes.append(failed(report, "fast", e)[:300])
                    log(f"fast   batch {batch} new {new}: {row.get('fast_ms')} ms/step")
                    if dev.type == "cuda" and not a.no_sdpa:
                        free_memory(dev)
                        try: row.update(time_fast(model, dev, batch, prompt, new, bucket, attention="sdpa"))
                        except Exception as e: notes.append(failed(report, "fast sdpa", e)[:300])
                        log(f"fast (SDPA attention) batch {batch} new {new}: {row.get('sdpa_ms')} ms/step")
                free_memory(dev)
                need = (1.05 * kv_bytes(cfg, batch, ctx + steps, elem)
                        + 4 * batch * (ctx - steps / 2) * cfg.intermediate_size * elem + 2 * GiB)
                if not fits(dev, need): notes.append(f"plain skipped: needs ~{need / GiB:.0f} GiB")
                else:
                    log(f"plain  batch {batch} ctx {ctx:.0f} ...")
                    try: row.update(time_plain(model, dev, batch, ctx, steps))
                    except Exception as e: notes.append(failed(report, "plain", e)[:300])
                    log(f"plain  batch {batch} ctx {ctx:.0f}: {row.get('plain_ms')} ms/step")
                free_memory(dev)
            if row.get("fast_ms") and row["floor_ms"]:
                row["fast_over_floor"] = round(row["fast_ms"] / row["floor_ms"], 2)
            if row.get("fast_ms") and row.get("plain_ms"):
                row["plain_over_fast"] = round(row["plain_ms"] / row["fast_ms"], 2)
            row["note"] = "; ".join(notes) or None
            report["rows"].append(row)
            write(out, {**report, "env": {**env, "seconds": time.perf_counter() - T0}})
    env["seconds"] = time.perf_counter() - T0
    write(out, report)
    log(f"wrote {out/'gpu.md'} and {out/'gpu.json'}")
    print((out/"gpu.md").read_text(), flush=True)
    if report["errors"]: sys.exit(f"{len(report['errors'])} failed: {report['errors']}")

if __name__ == "__main__": main()
