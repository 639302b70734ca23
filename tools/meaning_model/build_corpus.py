"""Step 1: the training corpus (English sentences) for the static meaning model.

Sources (all redistributable; the corpus itself is NOT shipped, only the table trained on it):
  - docstrings of every Python package installed in the build venv (run this script with that
    venv's python: distributions are resolved with importlib.metadata),
  - the long descriptions in that venv's *.dist-info/METADATA files,
  - docstrings of the CPython 3.11 standard library (without its test/ folder) and the
    pydoc_data topics (PSF licence),
  - LongMemEval turns (MIT), /work/shared/data/longmemeval/docs.jsonl.
Never LoCoMo (CC BY-NC). Any sentence equal to a text (or a sentence of a text) of the
evaluation sets (docs/research/meaning-channel/paraphrase.json, benchmarks/data/notebook.json)
is dropped.

Output: $BUILD/corpus.json  {"sentences": [...], "source": [...]}  (shuffled, seed 0)
        $BUILD/corpus_sources.json  per-distribution name, version, licence, sentence count.
Usage:  python build_corpus.py            (BUILD defaults to /tmp/build26)
"""
import ast, json, os, random, re, sys, sysconfig, time, pathlib
import importlib.metadata as md

BUILD = pathlib.Path(os.environ.get("BUILD", "/tmp/build26"))
REPO = pathlib.Path(os.environ.get("REPO", "/work/main"))
LME = pathlib.Path(os.environ.get("LME", "/work/shared/data/longmemeval/docs.jsonl"))
SITE = pathlib.Path(sysconfig.get_paths()["purelib"])          # the build venv's site-packages
STDLIB = pathlib.Path(sysconfig.get_paths()["stdlib"])

_LIST = re.compile(r"\n(?=[ \t]*(?:[-*+\u2022]|\d+[.)])\s)")     # a list item starts a new unit
_SENT = re.compile(r"(?<=[.!?])\s+")
_MD = re.compile(r"\*\*|__|`+|^#+\s*|^[ \t]*(?:[-*+\u2022]|\d+[.)])\s+", re.M)


def sentences(text):
    """Split a docstring / markdown / chat turn into candidate sentences (5-50 words, mostly letters)."""
    out = []
    for para in re.split(r"\n\s*\n", text):
        if ">>>" in para or "::" in para or "----" in para or "====" in para or "```" in para:
            continue                                        # code, rst tables, headings
        for unit in _LIST.split(para):
            unit = " ".join(_MD.sub("", unit).split())
            for s in _SENT.split(unit):
                w = s.split()
                if 5 <= len(w) <= 50 and sum(c.isalpha() for c in s) > 0.7 * len(s):
                    out.append(s)
    return out


def docstrings(path):
    try:
        tree = ast.parse(path.read_text(errors="ignore"))
    except Exception:
        return
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef, ast.Module)):
            d = ast.get_docstring(node)
            if d:
                yield d


def main():
    t0 = time.time()
    sents, source = {}, {}                       # sentence -> source tag (first seen)
    counts = {}

    def add(text, tag):
        for s in sentences(text):
            if s not in sents:
                sents[s] = tag; counts[tag] = counts.get(tag, 0) + 1

    # 1. installed distributions: docstrings of their .py files, and their METADATA description
    top_to_dist = md.packages_distributions()
    dists = {}
    for d in md.distributions():
        name = d.metadata["Name"]
        lic = d.metadata.get("License-Expression") or d.metadata.get("License") or ""
        if len(lic) > 80 or "\n" in lic:
            lic = lic.split("\n")[0][:80] + " ..."
        cls = [c.split("::")[-1].strip() for c in (d.metadata.get_all("Classifier") or []) if c.startswith("License ::")]
        dists[name] = {"version": d.version, "license": lic, "license_classifiers": cls, "docstrings": 0, "metadata": 0}
        body = d.metadata.get_payload() or d.metadata.get("Description") or ""
        before = counts.get(f"metadata:{name}", 0)
        add(body, f"metadata:{name}")
        dists[name]["metadata"] = counts.get(f"metadata:{name}", 0) - before
    py_files = 0
    for entry in sorted(SITE.iterdir()):
        top = entry.name[:-3] if entry.name.endswith(".py") else entry.name
        if entry.name.endswith((".dist-info", ".pth", ".libs")) or entry.name == "__pycache__":
            continue
        names = top_to_dist.get(top) or ["?"]
        tag = f"doc:{names[0]}"
        files = [entry] if entry.is_file() and entry.suffix == ".py" else (sorted(entry.rglob("*.py")) if entry.is_dir() else [])
        for f in files:
            py_files += 1
            for d in docstrings(f):
                add(d, tag)
        if names[0] in dists:
            dists[names[0]]["docstrings"] = counts.get(tag, 0)
        print(f"{time.time() - t0:6.0f}s {entry.name}: {counts.get(tag, 0)}", flush=True)

    # 2. the standard library and pydoc topics
    for f in sorted(STDLIB.rglob("*.py")):
        rel = f.relative_to(STDLIB).parts
        if rel[0] in ("site-packages", "test") or "tests" in rel:
            continue
        py_files += 1
        for d in docstrings(f):
            add(d, "stdlib")
    ns = {}
    exec((STDLIB / "pydoc_data" / "topics.py").read_text(), ns)
    for text in ns["topics"].values():
        add(text, "pydoc_topics")
    print(f"{time.time() - t0:6.0f}s stdlib {counts.get('stdlib', 0)} pydoc_topics {counts.get('pydoc_topics', 0)}", flush=True)

    # 3. LongMemEval turns (MIT)
    for line in open(LME):
        r = json.loads(line)
        add(r.get("text") or "", "longmemeval")

    # 4. drop anything equal to an evaluation text or to one of its sentences
    para = json.load(open(REPO / "docs/research/meaning-channel/paraphrase.json"))
    nb = json.load(open(REPO / "benchmarks/data/notebook.json"))
    ev = [m["content"] for m in para["memories"]] + [q["text"] for q in para["questions"]]
    for s in nb["sessions"]:
        for f in s["findings"]:
            ev += [f.get("content", ""), f.get("title", "")]
    ev += [q["text"] for q in nb["questions"]]
    ev_norm = set()
    for t in ev:
        if not t:
            continue
        ev_norm.add(" ".join(t.split()))
        ev_norm.update(sentences(t))
        ev_norm.update(" ".join(s.split()) for s in _SENT.split(t))
    ev_low = {e.lower() for e in ev_norm}
    dropped = [s for s in sents if s.lower() in ev_low]
    for s in dropped:
        del sents[s]
    print("evaluation texts:", len(ev), "their sentences:", len(ev_norm), "corpus sentences dropped:", len(dropped), flush=True)

    S = sorted(sents)
    random.Random(0).shuffle(S)
    by_src = {}
    for s in S:
        k = sents[s].split(":")[0]
        by_src[k] = by_src.get(k, 0) + 1
    json.dump({"sentences": S, "source": [sents[s] for s in S]}, open(BUILD / "corpus.json", "w"))
    used = {k: v for k, v in dists.items() if v["docstrings"] or v["metadata"]}
    json.dump({"python": sys.version.split()[0], "py_files": py_files, "by_source": by_src, "dropped_eval": len(dropped),
               "dropped_eval_examples": dropped[:20], "distributions": used, "all_distributions": sorted(dists)},
              open(BUILD / "corpus_sources.json", "w"), indent=1)
    print(f"{time.time() - t0:.0f}s total {len(S)} sentences; by source {by_src}; {py_files} .py files", flush=True)


if __name__ == "__main__":
    main()
