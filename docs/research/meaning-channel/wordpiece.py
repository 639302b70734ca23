"""Pure-Python BERT-uncased WordPiece (as all-MiniLM-L6-v2's tokenizer.json): NFD + strip accents,
lowercase, split on whitespace and punctuation, CJK characters apart, greedy longest match with
'##' continuations, [UNK] for a word with no split. Words are cached: a note costs dict lookups."""
import unicodedata, re, json, numpy as np

def _is_punct(ch):
    cp = ord(ch)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126: return True
    return unicodedata.category(ch).startswith("P")
def _is_cjk(cp):
    return (0x4E00 <= cp <= 0x9FFF or 0x3400 <= cp <= 0x4DBF or 0x20000 <= cp <= 0x2A6DF or 0x2A700 <= cp <= 0x2B73F
            or 0x2B740 <= cp <= 0x2B81F or 0x2B820 <= cp <= 0x2CEAF or 0xF900 <= cp <= 0xFAFF or 0x2F800 <= cp <= 0x2FA1F)

class WordPiece:
    def __init__(self, vocab):               # vocab: list of tokens, index = id
        self.vocab = {t: i for i, t in enumerate(vocab)}
        self.unk = self.vocab["[UNK]"]; self.cache = {}
        self._ascii = re.compile(r"[a-z0-9]+|[!-/:-@\[-`{-~]")
    @classmethod
    def from_tokenizer_json(cls, path):
        v = json.load(open(path))["model"]["vocab"]
        vocab = [None] * len(v)
        for t, i in v.items(): vocab[i] = t
        return cls(vocab)
    def _clean(self, text):
        out = []
        for ch in text:
            cp = ord(ch)
            if cp == 0 or cp == 0xFFFD or (unicodedata.category(ch) in ("Cc", "Cf") and ch not in "\t\n\r"): continue
            if _is_cjk(cp): out.append(f" {ch} ")
            elif ch in "\t\n\r" or unicodedata.category(ch) == "Zs": out.append(" ")
            else: out.append(ch)
        text = unicodedata.normalize("NFD", "".join(out).lower())
        return "".join(c for c in text if unicodedata.category(c) != "Mn")
    def _words(self, text):
        if text.isascii():
            return self._ascii.findall(text.lower())
        words = []
        for w in self._clean(text).split():
            cur = []
            for ch in w:
                if _is_punct(ch):
                    if cur: words.append("".join(cur)); cur = []
                    words.append(ch)
                else: cur.append(ch)
            if cur: words.append("".join(cur))
        return words
    def _piece(self, w):
        if len(w) > 100: return [self.unk]
        ids, start = [], 0
        while start < len(w):
            end = len(w); cur = None
            while start < end:
                s = w[start:end] if start == 0 else "##" + w[start:end]
                if s in self.vocab: cur = self.vocab[s]; break
                end -= 1
            if cur is None: return [self.unk]
            ids.append(cur); start = end
        return ids
    def ids(self, text):
        c = self.cache; out = []
        for w in self._words(text):
            p = c.get(w)
            if p is None:
                p = self._piece(w)
                if len(c) < 1_000_000: c[w] = p
            out.extend(p)
        return out
