"""Grading throughput on this machine: the 119 canonical LeetCode solutions and a hostile mix, serial vs `grade_many`.

Run: GQ_DATA_DIR=../shared/data/leetcode python benchmarks/grading.py   (writes benchmarks/grading.md and grading.json)
"""
import json, os, platform, time
from pathlib import Path
from gradient_quarantine.problems import load_leetcode, assign_modes
from gradient_quarantine.rewards import MODES, fenced, grade, grade_many, wrong_solution

HOSTILE = {  # programs appended to a wrong solution; each must end in a bounded time with no gt_correct
    "cpu spin": "while True: pass",
    "sleep forever": "import time\ntime.sleep(10 ** 6)",
    "fork bomb": "import os\nwhile True:\n    try: os.fork()\n    except OSError: pass",
    "memory bomb": "blocks = []\nwhile True: blocks.append(bytearray(1 << 26))",
    "1 GB of output": "import sys\nfor _ in range(1024): sys.stdout.write('x' * (1 << 20))",
    "exit 0 early": "import os\nos._exit(0)",
    "forge the report": "import os\nos.write(3, b'{\"k\": \"out\", \"i\": 0, \"v\": [\"i\", 0]}\\n')",
    "fd exhaustion": "import os\nfds = []\nwhile True:\n    try: fds.append(os.open('/dev/null', os.O_RDONLY))\n    except OSError: break",
}

def timed(fn):
    t0 = time.monotonic(); out = fn(); return out, time.monotonic() - t0

def main():
    test = load_leetcode("test")
    modes = assign_modes(test, MODES, seed=0)
    canon = [(fenced(p.canonical_solution), p, modes[p.id]) for p in test]
    hostile = [(fenced(wrong_solution(p) + "\n" + code), p, modes[p.id])
               for p, code in zip(test[:2 * len(HOSTILE)], list(HOSTILE.values()) * 2)]
    rows, slowest = [], []
    for name, jobs in (("119 canonical solutions", canon), (f"hostile mix ({len(hostile)} programs)", hostile)):
        serial, t_serial = timed(lambda: [(timed(lambda: grade(*j))) for j in jobs])
        parallel, t_par = timed(lambda: grade_many(jobs))
        assert [g for g, _ in serial] == parallel, f"{name}: grade_many disagrees with serial grading"
        if name.startswith("119"):
            assert all(g.gt_correct for g in parallel), "a canonical solution failed"
            slowest = sorted(((j[1].id, round(s, 2)) for j, (_, s) in zip(jobs, serial)), key=lambda x: -x[1])[:5]
        else: assert not any(g.gt_correct for g in parallel), "a hostile program was judged correct"
        rows.append({"workload": name, "n": len(jobs), "serial_s": round(t_serial, 2), "serial_per_s": round(len(jobs) / t_serial, 2),
                     "grade_many_s": round(t_par, 2), "grade_many_per_s": round(len(jobs) / t_par, 2),
                     "speedup": round(t_serial / t_par, 2)})
    meta = {"cpus": os.cpu_count(), "python": platform.python_version(), "workers": os.cpu_count(),
            "timeout_s": 3.0, "slowest_canonical_serial": slowest}
    table = ["| workload | n | serial s | serial /s | grade_many s | grade_many /s | speedup |", "|---|---|---|---|---|---|---|"]
    table += [f"| {r['workload']} | {r['n']} | {r['serial_s']} | {r['serial_per_s']} | {r['grade_many_s']} | {r['grade_many_per_s']} | {r['speedup']}x |" for r in rows]
    text = "\n".join(table) + f"\n\n{meta['cpus']} CPUs, Python {meta['python']}, timeout 3 s. Slowest canonical solutions (id, s, serial): {slowest}\n"
    print(text)
    here = Path(__file__).parent
    (here/"grading.md").write_text("# Grading throughput\n\n" + text)
    (here/"grading.json").write_text(json.dumps({"rows": rows, **meta}, indent=1) + "\n")

if __name__ == "__main__": main()
