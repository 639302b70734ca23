# Training corpus for the static model (never the evaluation set): sentences from the docstrings
# of installed scientific packages, plus LongMemEval and LoCoMo turns split into sentences.
import ast, json, re, random, pathlib
SP = pathlib.Path("/tmp/research26/venv/lib/python3.11/site-packages")
sents = set()
def add_text(t):
    for para in re.split(r"\n\s*\n", t):
        if ">>>" in para or "::" in para or "----" in para: continue
        para = " ".join(para.split())
        for s in re.split(r"(?<=[.!?])\s+", para):
            w = s.split()
            if 5 <= len(w) <= 50 and sum(c.isalpha() for c in s) > 0.7 * len(s): sents.add(s)
for pkg in ["pandas", "sklearn", "scipy", "numpy", "matplotlib", "transformers", "torch", "sympy", "networkx", "rich", "pydantic", "huggingface_hub", "onnx", "setuptools", "pip"]:
    for f in (SP / pkg).rglob("*.py"):
        try: tree = ast.parse(f.read_text(errors="ignore"))
        except Exception: continue
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef, ast.Module)):
                d = ast.get_docstring(node)
                if d: add_text(d)
n_doc = len(sents)
for line in open("/work/shared/data/longmemeval/docs.jsonl"):
    r = json.loads(line); add_text(r.get("text") or r.get("content") or "")
lo = json.load(open("/work/shared/data/locomo/locomo10.json"))
for conv in lo:
    for k, v in conv["conversation"].items():
        if isinstance(v, list):
            for turn in v: add_text(turn.get("text", ""))
sents = sorted(sents); random.Random(0).shuffle(sents)
print("docstrings", n_doc, "total", len(sents))
json.dump(sents, open("/tmp/research26/corpus.json", "w"))
