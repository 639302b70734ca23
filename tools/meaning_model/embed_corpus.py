"""Step 2: the teacher vectors. all-MiniLM-L6-v2 (sentence-transformers, normalize_embeddings=True)
embeds the first N corpus sentences in chunks of 4,096 saved to $BUILD/chunks/<start>.npy (float32,
384-d), so a stopped run resumes where it stopped. Within a chunk sentences are sorted by length
(less padding), the vectors are written back in corpus order.

Usage:  python embed_corpus.py N            (HF_HUB_OFFLINE=1; model folder $BUILD/models/minilm)
        python embed_corpus.py N --concat    (also writes $BUILD/teacher_N.npy when all chunks exist)
"""
import json, os, pathlib, sys, time
os.environ["HF_HUB_OFFLINE"] = "1"
import numpy as np

BUILD = pathlib.Path(os.environ.get("BUILD", "/tmp/build26"))
CHUNK = 4096


def concat(n):
    files = [BUILD / "chunks" / f"{i:07d}.npy" for i in range(0, n, CHUNK)]
    if all(f.exists() for f in files):
        T = np.concatenate([np.load(f) for f in files])[:n]
        np.save(BUILD / f"teacher_{n}.npy", T)
        print("wrote", BUILD / f"teacher_{n}.npy", T.shape, flush=True)


def main():
    n = int(sys.argv[1])
    S = json.load(open(BUILD / "corpus.json"))["sentences"][:n]
    n = len(S)
    (BUILD / "chunks").mkdir(exist_ok=True)
    import torch
    torch.set_num_threads(2)
    from sentence_transformers import SentenceTransformer
    model = SentenceTransformer(str(BUILD / "models" / "minilm"), device="cpu")
    t0 = time.time(); done = 0
    for i in range(0, n, CHUNK):
        f = BUILD / "chunks" / f"{i:07d}.npy"
        if f.exists():
            continue
        part = S[i:i + CHUNK]
        order = np.argsort([len(s) for s in part], kind="stable")
        v = model.encode([part[j] for j in order], batch_size=64, normalize_embeddings=True, convert_to_numpy=True)
        out = np.empty_like(v); out[order] = v
        np.save(str(f) + ".tmp.npy", out.astype(np.float32)); os.replace(str(f) + ".tmp.npy", f)
        done += len(part)
        el = time.time() - t0
        print(f"{i + len(part)}/{n} {done / el:.0f}/s elapsed {el / 60:.1f} min", flush=True)
    if "--concat" in sys.argv:
        concat(n)


if __name__ == "__main__":
    main()
