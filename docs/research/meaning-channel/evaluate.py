import json, sys, numpy as np
sys.path.insert(0, "/tmp/research26")
import encoders
D = json.load(open("/tmp/research26/paraphrase.json"))
MID = [m["id"] for m in D["memories"]]; MT = [m["content"] for m in D["memories"]]
def ndcg10(ranked, rel):
    dcg = sum(1 / np.log2(i + 2) for i, m in enumerate(ranked[:10]) if m in rel)
    idcg = sum(1 / np.log2(i + 2) for i in range(min(len(rel), 10)))
    return dcg / idcg
def evaluate(enc, verbose=False):
    M = enc.encode(MT)
    res = {}
    for setname in ("paraphrase", "same_words"):
        qs = [q for q in D["questions"] if q["set"] == setname]
        Q = enc.encode([q["text"] for q in qs])
        S = Q @ M.T
        nd, h1, ans_sims, best_non, per_q = [], [], [], [], []
        for qi, q in enumerate(qs):
            rel = set(D["qrels"][q["id"]])
            order = np.argsort(-S[qi]); ranked = [MID[j] for j in order]
            nd.append(ndcg10(ranked, rel)); h1.append(ranked[0] in rel)
            top10 = order[:10]
            a = [(S[qi, j], j in top10) for j, m in enumerate(MID) if m in rel]
            non = [S[qi, j] for j, m in enumerate(MID) if m not in rel]
            ans_sims += [s for s, _ in a]; best_non.append(max(non))
            per_q.append((a, sorted(non, reverse=True)[:10]))
        thr = {}
        for t in np.arange(0.15, 0.701, 0.05):
            rec = np.mean([s >= t and intop for a, _ in per_q for s, intop in a])
            fp = np.mean([sum(1 for s in non if s >= t) for _, non in per_q])  # non-answers in top10-by-sim above t
            qfp = np.mean([any(s >= t for s in non) for _, non in per_q])
            thr[f"{t:.2f}"] = (round(float(rec), 3), round(float(fp), 2), round(float(qfp), 2))
        res[setname] = dict(ndcg10=round(float(np.mean(nd)), 3), hit1=round(float(np.mean(h1)), 3),
            ans_sim=np.percentile(ans_sims, [10, 25, 50, 75, 90]).round(3).tolist(),
            best_non=np.percentile(best_non, [10, 25, 50, 75, 90]).round(3).tolist(), thr=thr)
    return res
if __name__ == "__main__":
    for n in sys.argv[1:]:
        r = evaluate(encoders.load(n))
        print(json.dumps({"model": n, **r}))
