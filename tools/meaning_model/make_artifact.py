"""Step 5: quantise the trained table to int8 (per-row float32 scale = max|row| / 127) and write the
numpy-only artefact: vocab (unicode, index = token id), table (int8 V x dims), scale (float32 V),
meta (JSON string). Prints size, sha256, np.load times of the compressed and plain archives, and
keeps the plain one when decompressing costs more than 150 ms.

Usage:  python make_artifact.py --run $BUILD/run_name --out $BUILD/out/static-minilm-256.npz
"""
import argparse, hashlib, json, os, pathlib, time
import numpy as np

BUILD = pathlib.Path(os.environ.get("BUILD", "/tmp/build26"))


def load_time(path, reps=7):
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        with np.load(path, allow_pickle=False) as z:
            _ = [z[k] for k in ("vocab", "table", "scale", "meta")]
        ts.append(time.perf_counter() - t)
    return float(np.median(ts))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--run", required=True); ap.add_argument("--out", required=True)
    ap.add_argument("--name", default="slm-static-minilm-256")
    a = ap.parse_args()
    run = pathlib.Path(a.run)
    E = np.load(run / "table_f32.npy").astype(np.float32)
    log = json.load(open(run / "train.json"))
    tj = json.load(open(BUILD / "m2v_init" / "tokenizer.json"))["model"]["vocab"]
    vocab = [None] * len(tj)
    for t, i in tj.items():
        vocab[i] = t
    assert len(vocab) == E.shape[0] and all(v is not None for v in vocab)
    sc = np.abs(E).max(1) / 127.0
    sc = np.where(sc > 0, sc, 1.0).astype(np.float32)
    q = np.clip(np.round(E / sc[:, None]), -127, 127).astype(np.int8)
    deq = q.astype(np.float32) * sc[:, None]
    cos = (deq * E).sum(1) / np.maximum(np.linalg.norm(deq, axis=1) * np.linalg.norm(E, axis=1), 1e-12)
    print(f"int8 row cosine to float32: min {cos.min():.5f} mean {cos.mean():.6f}")
    meta = {"name": a.name, "version": 1, "dims": int(E.shape[1]),
            "teacher": "sentence-transformers/all-MiniLM-L6-v2", "sentences": int(log["sentences"]),
            "epochs": int(log["args"]["epochs"])}
    arrays = dict(vocab=np.array(vocab, dtype=str), table=q, scale=sc, meta=np.array(json.dumps(meta)))
    out = pathlib.Path(a.out); out.parent.mkdir(parents=True, exist_ok=True)
    comp = out.with_suffix(".compressed.npz"); plain = out.with_suffix(".plain.npz")
    np.savez_compressed(comp, **arrays); np.savez(plain, **arrays)
    res = {}
    for kind, p in (("compressed", comp), ("plain", plain)):
        res[kind] = {"bytes": p.stat().st_size, "load_ms": round(load_time(p) * 1000, 1)}
        print(kind, res[kind], flush=True)
    keep = comp if res["compressed"]["load_ms"] <= 150 else plain
    os.replace(keep, out)
    (plain if keep is comp else comp).unlink()
    sha = hashlib.sha256(out.read_bytes()).hexdigest()
    info = {"path": str(out), "format": "compressed" if keep is comp else "plain", "bytes": out.stat().st_size,
            "sha256": sha, "meta": meta, "load_ms": res, "int8_row_cos_min": float(cos.min())}
    json.dump(info, open(str(out) + ".json", "w"), indent=1)
    print(json.dumps(info, indent=1))


if __name__ == "__main__":
    main()
