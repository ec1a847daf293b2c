"""Generation from a running interpreter vs the CLI: the same model, seed and
record count, alternating. Usage (pinned, from the repository root):
    taskset -c 1 build/pyvenv/bin/python python/bench/generate_inprocess.py MODEL_DIR [RECORDS] [RUNS]
"""
import resource
import subprocess
import sys
import time

import datasynth

M = sys.argv[1]
N = int(sys.argv[2]) if len(sys.argv) > 2 else 10000
RUNS = int(sys.argv[3]) if len(sys.argv) > 3 else 5
CLI = "build/datasynth"
model = datasynth.Model.load(M)


def cpu():  # user + sys of this process and its (waited-for) children: the workers
    r, s = resource.getrusage(resource.RUSAGE_CHILDREN), resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime + s.ru_utime + s.ru_stime


tot = [0.0, 0.0, 0.0, 0.0]
for i in range(RUNS):
    c0, t0 = cpu(), time.perf_counter()
    subprocess.run([CLI, "generate", "-m", M, "-n", str(N), "--seed", "7", "-o", "/dev/null"],
                   check=True, capture_output=True)
    c1, t1 = cpu(), time.perf_counter()
    df = model.generate(N, seed=7, progress=False)
    c2, t2 = cpu(), time.perf_counter()
    assert len(df) == N
    tot = [tot[0] + t1 - t0, tot[1] + c1 - c0, tot[2] + t2 - t1, tot[3] + c2 - c1]
    print(f"run {i + 1}: cli {t1 - t0:.2f}s wall {c1 - c0:.2f}s cpu | "
          f"Model.generate {t2 - t1:.2f}s wall {c2 - c1:.2f}s cpu", flush=True)
print(f"Model.generate vs CLI: wall {100 * (tot[2] / tot[0] - 1):+.1f}%, "
      f"cpu {100 * (tot[3] / tot[1] - 1):+.1f}%")
