import sys, json
for l in open(sys.argv[1]):
    try: r = json.loads(l)
    except Exception: continue
    p, s = r["paraphrase"], r["same_words"]
    print(f"{r['model']:32s} para nDCG {p['ndcg10']:.3f} hit1 {p['hit1']:.3f} | same nDCG {s['ndcg10']:.3f} hit1 {s['hit1']:.3f}")
    print("   answer-cos p10/25/50/75/90", p["ans_sim"], " best-non-answer", p["best_non"])
    print("   thr->(recall@10>=t, non-answers>=t per q, share of q with a non-answer>=t)", {k: v for k, v in p["thr"].items()})
