# One candidate per process: load time, RSS, one short text (p50 ms), bulk notes/s (wall and CPU).
import os, sys, time, json, resource
os.environ["HF_HUB_OFFLINE"] = "1"
def rss_mb():
    for l in open("/proc/self/status"):
        if l.startswith("VmRSS"): return int(l.split()[1]) / 1024
import numpy as np
sys.path.insert(0, "/tmp/research26")
name = sys.argv[1]; nbulk = int(sys.argv[2]) if len(sys.argv) > 2 else 20000
S = json.load(open("/tmp/research26/corpus.json"))
notes = [s for s in S[-60000:] if 10 <= len(s.split()) <= 40][:nbulk]     # never in the training slice
r0 = rss_mb(); t0 = time.perf_counter(); c0 = time.process_time()
if name.startswith("py:"):          # numpy-only static model + pure-Python WordPiece
    from wordpiece import WordPiece
    from safetensors.numpy import load_file
    path = f"/tmp/research26/static/{name[3:]}"
    w = load_file(f"{path}/model.safetensors")
    E = (w["embeddings_i8"].astype(np.float32) * w["scales"]) if "embeddings_i8" in w else w["embeddings"].astype(np.float32)
    wp = WordPiece.from_tokenizer_json(f"{path}/tokenizer.json")
    def encode(texts, batch_size=None):
        ids = [wp.ids(t) for t in texts]
        lens = np.fromiter(map(len, ids), np.int64, len(ids))
        flat = np.fromiter((i for x in ids for i in x), np.int64, int(lens.sum()))
        out = np.zeros((len(texts), E.shape[1]), np.float32); nz = lens > 0
        if nz.any():
            starts = np.concatenate([[0], np.cumsum(lens)[:-1]])
            out[nz] = np.add.reduceat(E[flat], starts[nz], axis=0)
        return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)
    def one(t):
        v = E[wp.ids(t)].sum(0); return v / (np.linalg.norm(v) or 1.0)
elif name.startswith("m2vlib:"):
    from model2vec import StaticModel
    m = StaticModel.from_pretrained(f"/tmp/research26/static/{name[7:]}")
    encode = lambda texts, batch_size=None: m.encode(texts, batch_size=1024)
    one = lambda t: m.encode([t])
elif name == "tlsm":
    from static_model import get_embeddings
    encode = lambda texts, batch_size=None: np.asarray(get_embeddings(list(texts)))
    one = lambda t: get_embeddings(t)
else:
    import encoders
    e = encoders.load(name); encode = e.encode; one = lambda t: e.encode([t])
one("warm up the model")
load_s = time.perf_counter() - t0; r1 = rss_mb()
# one short text
qs = ["why do the amounts in the older records look inconsistent", "which shops should be left out of the income figures",
      "Median session length is 4 minutes, but the mean is 19 because of bots that keep tabs open."]
ts = []
for i in range(60 if not name.startswith(("py:", "m2vlib:", "tlsm")) else 600):
    q = qs[i % 3] + f" {i}"
    t = time.perf_counter(); one(q); ts.append((time.perf_counter() - t) * 1000)
# bulk (cold word cache for py:)
if name.startswith("py:"): wp.cache.clear()
t = time.perf_counter(); c = time.process_time(); encode(notes, batch_size=64)
wall = time.perf_counter() - t; cpu = time.process_time() - c
print(json.dumps({"model": name, "load_s": round(load_s, 2), "rss_after_load_mb": round(r1, 1), "rss_added_mb": round(r1 - r0, 1),
                  "rss_peak_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
                  "one_ms_p50": round(float(np.median(ts)), 3), "one_ms_p90": round(float(np.percentile(ts, 90)), 3),
                  "bulk_n": len(notes), "bulk_per_s_wall": round(len(notes) / wall), "bulk_per_cpu_s": round(len(notes) / cpu),
                  "loadavg": os.getloadavg()[0]}), flush=True)
