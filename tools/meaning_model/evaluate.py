"""Step 6: quality on docs/research/meaning-channel/paraphrase.json (the study's evaluate.py logic).

For the "paraphrase" and "same_words" question sets: nDCG@10 and hit@1 over the 50 memories, and
the threshold table: for t in 0.15..0.70, (recall of answers that are in the top 10 with cosine
>= t, mean number of non-answers (among each question's 10 best) with cosine >= t, share of
questions with at least one non-answer >= t).

Models: "minilm" (sentence-transformers, $BUILD/models/minilm, normalize_embeddings=True) or
"npz:<path>" (the artefact, read by static_model.py only).
Usage:  python evaluate.py minilm npz:$BUILD/out/static-minilm-256.npz > quality.jsonl
"""
import json, os, pathlib, sys
os.environ["HF_HUB_OFFLINE"] = "1"
import numpy as np

BUILD = pathlib.Path(os.environ.get("BUILD", "/tmp/build26"))
REPO = pathlib.Path(os.environ.get("REPO", "/work/main"))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))


def load(name):
    if name == "minilm":
        import torch
        torch.set_num_threads(2)
        from sentence_transformers import SentenceTransformer
        m = SentenceTransformer(str(BUILD / "models" / "minilm"), device="cpu")
        return lambda texts: m.encode(list(texts), batch_size=64, normalize_embeddings=True, convert_to_numpy=True)
    if name.startswith("npz:"):
        from static_model import StaticModel
        m = StaticModel.from_file(name[4:])
        return m.encode
    raise KeyError(name)


def ndcg10(ranked, rel):
    dcg = sum(1 / np.log2(i + 2) for i, m in enumerate(ranked[:10]) if m in rel)
    idcg = sum(1 / np.log2(i + 2) for i in range(min(len(rel), 10)))
    return dcg / idcg


def evaluate(encode, D):
    MID = [m["id"] for m in D["memories"]]
    M = encode([m["content"] for m in D["memories"]])
    res = {}
    for setname in ("paraphrase", "same_words"):
        qs = [q for q in D["questions"] if q["set"] == setname]
        Q = encode([q["text"] for q in qs])
        S = Q @ M.T
        nd, h1, ans_sims, best_non, per_q = [], [], [], [], []
        for qi, q in enumerate(qs):
            rel = set(D["qrels"][q["id"]])
            order = np.argsort(-S[qi]); ranked = [MID[j] for j in order]
            nd.append(ndcg10(ranked, rel)); h1.append(ranked[0] in rel)
            top10 = set(order[:10].tolist())
            a = [(S[qi, j], j in top10) for j, m in enumerate(MID) if m in rel]
            non = [S[qi, j] for j, m in enumerate(MID) if m not in rel]
            ans_sims += [s for s, _ in a]; best_non.append(max(non))
            per_q.append((a, sorted(non, reverse=True)[:10]))
        thr = {}
        for t in np.arange(0.15, 0.701, 0.05):
            rec = np.mean([s >= t and intop for a, _ in per_q for s, intop in a])
            fp = np.mean([sum(1 for s in non if s >= t) for _, non in per_q])
            qfp = np.mean([any(s >= t for s in non) for _, non in per_q])
            thr[f"{t:.2f}"] = (round(float(rec), 3), round(float(fp), 2), round(float(qfp), 2))
        res[setname] = dict(n=len(qs), ndcg10=round(float(np.mean(nd)), 3), hit1=round(float(np.mean(h1)), 3),
                            ans_sim=np.percentile(ans_sims, [10, 25, 50, 75, 90]).round(3).tolist(),
                            best_non=np.percentile(best_non, [10, 25, 50, 75, 90]).round(3).tolist(), thr=thr)
    return res


if __name__ == "__main__":
    D = json.load(open(REPO / "docs/research/meaning-channel/paraphrase.json"))
    for name in sys.argv[1:]:
        print(json.dumps({"model": name, **evaluate(load(name), D)}), flush=True)
