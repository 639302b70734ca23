# Which of the embedded corpus sentences come from package docstrings (reproducible from PyPI alone).
import json, numpy as np, re, ast, pathlib
exec(open("/tmp/research26/build_corpus.py").read().split("n_doc = len(sents)")[0])
S = json.load(open("/tmp/research26/corpus.json")); T = np.load("/tmp/research26/corpus_teacher.npy")
keep = [i for i in range(len(T)) if S[i] in sents]
print(len(keep), "of", len(T))
json.dump([S[i] for i in keep], open("/tmp/research26/corpus_doc.json", "w")); np.save("/tmp/research26/corpus_doc_teacher.npy", T[keep])
