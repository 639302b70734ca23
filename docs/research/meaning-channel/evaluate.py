"""The study's quality run (results_quality_*.jsonl): each encoder of encoders.py on
paraphrase.json, scored by the build's own scoring, tools/meaning_model/evaluate.py."""
import json
import pathlib
import sys

sys.path.insert(0, "/tmp/research26")
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[3] / "tools" / "meaning_model"))
import encoders  # noqa: E402
from evaluate import evaluate  # noqa: E402  (the build's: the same nDCG, hit@1 and threshold table)

if __name__ == "__main__":
    D = json.load(open("/tmp/research26/paraphrase.json"))
    for n in sys.argv[1:]:
        print(json.dumps({"model": n, **evaluate(encoders.load(n).encode, D)}))
