"""Step 7a: static_model.py's pure-Python WordPiece against the `tokenizers` library (the artefact's
vocabulary = model2vec's tokenizer.json, no special tokens added) on a seeded sample of corpus
sentences, and separately on every corpus sentence that is not ASCII (the slow path).

Usage:  python check_tokenizer.py $BUILD/out/static-minilm-256.npz [n=5000]
"""
import json, os, pathlib, random, sys
import numpy as np

BUILD = pathlib.Path(os.environ.get("BUILD", "/tmp/build26"))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from static_model import StaticModel
from tokenizers import Tokenizer

path = sys.argv[1]; n = int(sys.argv[2]) if len(sys.argv) > 2 else 5000
m = StaticModel.from_file(path)
tok = Tokenizer.from_file(str(BUILD / "m2v_init" / "tokenizer.json")); tok.no_padding(); tok.no_truncation()
assert tok.get_vocab() == m.tokenizer.vocab, "vocabularies differ"
S = json.load(open(BUILD / "corpus.json"))["sentences"]
sample = random.Random(0).sample(S, n)
nonascii = [s for s in S if not s.isascii()]
extra = ["Café naïve résumé — “quotes” and ‘single’", "ＡＢＣ full-width", "日本語のテキスト and 中文", "İstanbul ΣΊΣΥΦΟΣ",
         "tab\there\x0bvertical\x0cform\x85nel", "zero\u200bwidth\u2028line", "emoji 😀👍 ok", "a" * 120 + " long word",
         "[UNK] [PAD] literal specials", "x\U0002B820y and x\U0002B920y", "\ufeffbom start", "mixed\u00a0nbsp"]
for name, texts in (("sample", sample), ("non-ascii corpus", nonascii), ("edge cases", extra)):
    ref = [e.ids for e in tok.encode_batch(texts, add_special_tokens=False)]
    bad = [(t, r, m.tokenizer.ids(t)) for t, r in zip(texts, ref) if m.tokenizer.ids(t) != r]
    print(json.dumps({"set": name, "n": len(texts), "agree": len(texts) - len(bad)}), flush=True)
    for t, r, p in bad[:8]:
        print("  MISMATCH", repr(t[:120]), "\n    tokenizers", tok.decode(r) if False else [tok.id_to_token(i) for i in r][:30],
              "\n    static_model", [tok.id_to_token(i) for i in p][:30])
