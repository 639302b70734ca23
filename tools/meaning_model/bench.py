"""Step 7b: speed of static_model.py on the artefact: from_file time, one text (p50/p90 ms over 600
different short texts, warm word cache as in a session), bulk texts/s on 20,000 notebook-like
sentences (10-40 words, taken from the end of the corpus, cold word cache), wall and CPU.

Usage:  python bench.py $BUILD/out/static-minilm-256.npz
"""
import json, os, pathlib, sys, time
import numpy as np

BUILD = pathlib.Path(os.environ.get("BUILD", "/tmp/build26"))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from static_model import StaticModel

path = sys.argv[1]
S = json.load(open(BUILD / "corpus.json"))["sentences"]
notes = [s for s in reversed(S) if 10 <= len(s.split()) <= 40][:20000]
t = time.perf_counter(); m = StaticModel.from_file(path); load_ms = (time.perf_counter() - t) * 1000
m.encode(["warm up"])
qs = ["why do the amounts in the older records look inconsistent", "which shops should be left out of the income figures",
      "Median session length is 4 minutes, but the mean is 19 because of bots that keep tabs open."]
ts = []
for i in range(600):
    q = qs[i % 3] + f" {i}"
    t = time.perf_counter(); m.encode([q]); ts.append((time.perf_counter() - t) * 1000)
m.tokenizer.cache.clear()
t = time.perf_counter(); c = time.process_time(); V = m.encode(notes); wall = time.perf_counter() - t; cpu = time.process_time() - c
t = time.perf_counter(); m.encode(notes); wall2 = time.perf_counter() - t
print(json.dumps({"model": path, "from_file_ms": round(load_ms, 1),
                  "one_ms_p50": round(float(np.median(ts)), 4), "one_ms_p90": round(float(np.percentile(ts, 90)), 4),
                  "bulk_n": len(notes), "bulk_per_s_cold": round(len(notes) / wall), "bulk_per_cpu_s_cold": round(len(notes) / cpu),
                  "bulk_per_s_warm": round(len(notes) / wall2), "shape": list(V.shape), "loadavg": os.getloadavg()[0]}), flush=True)
