"""Where one pocket update's time goes on this CPU: generation (prefill, decode), a direction read on the pairs, and the
learning micro-batch (32 rollouts, as the trainer's `learn_micro_batch` runs it) split by operator with torch's
profiler, with the minor page faults and the system CPU time of each step.

Each checkout runs in its own fresh process, old and new in turn (`--rounds`). Run from the repository root:
python benchmarks/cpu_job/profile_step.py --old /tmp/old --new .  (writes profile_step.json and profile_step.md, or to
--out DIR). --smoke: one round of a tiny run's update (smoke.SMOKE_RUN), the working tree as both old and new unless
--old says otherwise, to a temporary folder.
"""
import argparse, json, os, statistics, subprocess, sys, time
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from provenance import cpu_model, footer, provenance, results_dir
from smoke import SMOKE_RUN

POCKET_RUN = {"preset": "pocket", "seed": 7, "steps": 3}     # one update of this run is profiled
CHILD = r'''
import atexit, json, resource, shutil, sys, tempfile, time, torch
from torch.profiler import profile, ProfilerActivity
from gradient_quarantine.config import resolve_config
from gradient_quarantine.direction import _CACHE, pair_gradients
from gradient_quarantine.generate import Sampling
from gradient_quarantine.route import Router
from gradient_quarantine.train import Trainer
scratch = tempfile.mkdtemp(); atexit.register(shutil.rmtree, scratch, True)
cfg = resolve_config(run_dir=scratch + "/run", **json.loads(sys.argv[1]))
trainer = Trainer(cfg, progress=False); trainer.resume()
def usage(): r = resource.getrusage(resource.RUSAGE_SELF); return r.ru_minflt, r.ru_stime, time.perf_counter()
def spent(a, b): return {"s": b[2] - a[2], "minor_faults": b[0] - a[0], "sys_s": b[1] - a[1]}
out = {"generate": [], "pairs": [], "learn": []}
torch.manual_seed(0)
prompts = trainer.rollouts(1).prompts                     # one update's prompts (pocket: 64, 8 problems x 8)
sampling = Sampling(cfg.temperature, cfg.top_p, cfg.top_k, cfg.max_new_tokens)
for _ in range(2):
    stats, a = {}, usage(); torch.manual_seed(1)
    comps = trainer.generator(trainer.model, trainer.tok, prompts, sampling, batch_size=cfg.gen_batch, stats=stats)
    out["generate"].append({**spent(a, usage()), "prefill_s": stats["prefill_s"], "decode_s": stats["decode_s"]})
for _ in range(2):
    _CACHE.clear(); a = usage()
    pair_gradients(trainer.model, trainer.knobs, trainer.tok, trainer.pairs, **trainer.pair_batches)
    out["pairs"].append(spent(a, usage()))
class Batch: pass
ro = Batch(); ro.prompts, ro.comps = prompts, comps
router = Router(trainer.knobs, trainer.gate(1), cfg.granularity, cfg.gate_scope)
A = torch.randn(len(prompts), generator=torch.Generator().manual_seed(0))
rows = list(range(min(cfg.micro_batch, len(prompts))))                   # pocket: a micro-batch of 32
out["shape"] = {"rollouts": len(prompts), "pairs": len(trainer.pairs), "micro_batch": len(rows)}
out["tokens"] = {"real": sum(len(prompts[i]) + len(comps[i]) for i in rows),
                 "padded": len(rows) * max(len(prompts[i]) + len(comps[i]) for i in rows),
                 "completion": sum(len(comps[i]) for i in rows)}
for _ in range(3):
    a = usage(); trainer.learn_micro_batch(1, ro, rows, A, router, 1000); out["learn"].append(spent(a, usage()))
with profile(activities=[ProfilerActivity.CPU]) as prof: trainer.learn_micro_batch(1, ro, rows, A, router, 1000)
ops = sorted(prof.key_averages(), key=lambda e: -e.self_cpu_time_total)
out["ops"] = [{"op": e.key, "self_s": e.self_cpu_time_total / 1e6, "calls": e.count} for e in ops[:15]]
out["ops_total_s"] = sum(e.self_cpu_time_total for e in ops) / 1e6
print(json.dumps(out))
'''

def run(checkout: Path, spec: dict) -> dict:
    load = os.getloadavg()[0]
    proc = subprocess.run([sys.executable, "-c", CHILD, json.dumps(spec)], cwd=str(checkout), capture_output=True,
                          text=True, env={**os.environ, "PYTHONPATH": str(checkout)})
    if proc.returncode: raise RuntimeError(proc.stderr[-3000:])
    return {"load_before": load, "load_after": os.getloadavg()[0], **json.loads(proc.stdout.strip().splitlines()[-1])}

def markdown(report: dict) -> str:
    shape = report["runs"][0]["shape"]
    lines = [f"# One {report['run']['preset']} update's parts on this CPU, old against new", "",
             f"{report['machine']}. Per run (a fresh process): generating one update's {shape['rollouts']} rollouts "
             f"(two repeats), one direction read on the {shape['pairs']} pairs (two repeats), one learning micro-batch "
             f"of {shape['micro_batch']} rollouts (three repeats, as `learn_micro_batch`); medians, with the process's "
             "minor page faults and system CPU seconds. *load*: the 1-minute load average before the run (the machine "
             "is shared).", "",
             "| round | side | load | generate s (prefill, decode) | pairs s | learn s | learn faults | learn sys s |",
             "|---|---|---|---|---|---|---|---|"]
    med = lambda xs, k: statistics.median(x[k] for x in xs)
    for r in report["runs"]:
        lines.append(f"| {r['round']} | {r['side']} | {r['load_before']:.1f} | {med(r['generate'], 's'):.2f} "
                     f"({med(r['generate'], 'prefill_s'):.2f}, {med(r['generate'], 'decode_s'):.2f}) "
                     f"| {med(r['pairs'], 's'):.2f} | {med(r['learn'], 's'):.2f} "
                     f"| {med(r['learn'], 'minor_faults'):,.0f} | {med(r['learn'], 'sys_s'):.2f} |")
    t = report["runs"][0]["tokens"]
    lines += ["", f"The micro-batch: {t['real']:,} real tokens in {t['padded']:,} padded positions "
              f"({1 - t['real'] / t['padded']:.0%} padding), {t['completion']:,} completion tokens "
              f"({t['completion'] / t['padded']:.0%} of the positions: the only ones the loss reads).", ""]
    for side in ("old", "new"):
        r = next(x for x in report["runs"] if x["side"] == side)
        lines += [f"Profile of one micro-batch, {side} (round {r['round']}): {r['ops_total_s']:.2f} s of operator time",
                  "", "| operator | self s | share | calls |", "|---|---|---|---|"]
        lines += [f"| `{o['op']}` | {o['self_s']:.3f} | {o['self_s'] / r['ops_total_s']:.0%} | {o['calls']} |"
                  for o in r["ops"][:10]] + [""]
    lines += [f"`python benchmarks/cpu_job/profile_step.py {report['argv']}` took "
              f"{report['seconds'] / 60:.1f} minutes.", "", footer(report["provenance"])]
    return "\n".join(lines) + "\n"

def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--old", default=None, help="the old checkout (required, except in a smoke: the working tree)")
    p.add_argument("--new", default=".")
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--out", default=None, help="folder for the results (default: beside this script)")
    p.add_argument("--smoke", action="store_true", help="a tiny run's update, old = new = the working tree unless "
                   "--old says otherwise, to a temporary folder: checks the script")
    args, t0 = p.parse_args(), time.time()
    if args.old is None and not args.smoke: p.error("--old is required (except with --smoke)")
    out, record = results_dir(args.out, args.smoke, __file__), provenance()
    spec = {**SMOKE_RUN, "seed": POCKET_RUN["seed"]} if args.smoke else POCKET_RUN
    if args.smoke: args.rounds = 1
    checkouts = {"old": Path(args.old) if args.old else Path(__file__).resolve().parents[2], "new": Path(args.new)}
    runs = []
    for rnd in range(1, args.rounds + 1):
        for side in (("old", "new") if rnd % 2 else ("new", "old")):
            runs.append({"round": rnd, "side": side, **run(checkouts[side].resolve(), spec)})
            print(f"round {rnd} {side}: learn {statistics.median(x['s'] for x in runs[-1]['learn']):.2f} s",
                  file=sys.stderr)
    report = {"provenance": record, "smoke": args.smoke, "run": spec,
              "machine": f"{os.cpu_count()} CPUs ({cpu_model()}), {time.strftime('%Y-%m-%d', time.gmtime())}",
              "argv": " ".join(sys.argv[1:]), "runs": runs, "seconds": time.time() - t0}
    out.mkdir(parents=True, exist_ok=True)
    (out/"profile_step.json").write_text(json.dumps(report, indent=1) + "\n")
    (out/"profile_step.md").write_text(markdown(report))
    print(markdown(report))

if __name__ == "__main__": main()
