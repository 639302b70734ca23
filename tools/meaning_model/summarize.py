"""Markdown tables from evaluate.py's JSON lines.  Usage: python summarize.py quality.jsonl [...]"""
import json, sys
rows = [json.loads(l) for f in sys.argv[1:] for l in open(f) if l.startswith("{")]
print("| model | paraphrase nDCG@10 / hit@1 | same words nDCG@10 / hit@1 | paraphrase answer cos p10/p50/p90 | best non-answer p10/p50/p90 |")
print("|---|---|---|---|---|")
for r in rows:
    p, s = r["paraphrase"], r["same_words"]
    print(f"| {r['model']} | {p['ndcg10']:.3f} / {p['hit1']:.3f} | {s['ndcg10']:.3f} / {s['hit1']:.3f} | "
          f"{p['ans_sim'][0]:.2f} / {p['ans_sim'][2]:.2f} / {p['ans_sim'][4]:.2f} | {p['best_non'][0]:.2f} / {p['best_non'][2]:.2f} / {p['best_non'][4]:.2f} |")
for setname in ("paraphrase", "same_words"):
    print(f"\n{setname}: recall of answers in the top 10 at cos >= t / non-answers >= t per question / share of questions with one\n")
    print("| t | " + " | ".join(r["model"] for r in rows) + " |"); print("|---" * (len(rows) + 1) + "|")
    for t in rows[0][setname]["thr"]:
        print(f"| {t} | " + " | ".join("{:.3f} / {:.2f} / {:.0%}".format(*r[setname]["thr"][t]) for r in rows) + " |")
