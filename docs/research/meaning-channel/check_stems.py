import json, re, Stemmer
from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS
st = Stemmer.Stemmer("english")
def stems(t):
    t = t.lower()
    toks = re.findall(r"[a-z0-9]+", t.replace("'", ""))  # splits identifiers into parts too
    toks += [x for x in re.findall(r"[a-z]+", t)]        # letter runs (word2vec -> word, vec)
    return {st.stemWord(w) for w in toks if w not in ENGLISH_STOP_WORDS and len(w) > 1}
d = json.load(open("/tmp/research26/paraphrase.json"))
M = {m["id"]: m["content"] for m in d["memories"]}
bad = 0
for q in d["questions"]:
    if q["set"] != "paraphrase": continue
    for a in d["qrels"][q["id"]]:
        s = stems(q["text"]) & stems(M[a])
        if s: bad += 1; print(q["id"], a, sorted(s), "|", q["text"])
sw = [q for q in d["questions"] if q["set"] == "same_words"]
print("paraphrase overlaps:", bad, "; same-words with overlap:", sum(all(stems(q["text"]) & stems(M[a]) for a in d["qrels"][q["id"]]) for q in sw), "/", len(sw))
