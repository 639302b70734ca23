import os, json, re, time, numpy as np
os.environ.setdefault("HF_HUB_OFFLINE", "1")
R = "/tmp/research26"
MINILM = f"{R}/models/minilm"

def _norm(v):
    v = np.asarray(v, dtype=np.float32)
    return v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)

class STTorch:
    name = "minilm-st-torch"
    def __init__(self):
        import torch; torch.set_num_threads(2)
        from sentence_transformers import SentenceTransformer
        self.m = SentenceTransformer(MINILM, device="cpu")
    def encode(self, texts, batch_size=64):
        return self.m.encode(list(texts), batch_size=batch_size, normalize_embeddings=True, convert_to_numpy=True)

class ORT:
    def __init__(self, path, name, threads=2):
        import onnxruntime as ort
        from tokenizers import Tokenizer
        so = ort.SessionOptions(); so.intra_op_num_threads = threads; so.inter_op_num_threads = 1
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        self.s = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
        self.tok = Tokenizer.from_file(f"{MINILM}/tokenizer.json")
        self.tok.enable_truncation(256); self.tok.enable_padding(pad_id=0, pad_token="[PAD]")
        self.name = name
    def encode(self, texts, batch_size=32):
        out = []
        texts = list(texts)
        # sort by length so batches pad little
        order = np.argsort([len(t) for t in texts])
        for i in range(0, len(texts), batch_size):
            idx = order[i:i + batch_size]
            enc = self.tok.encode_batch([texts[j] for j in idx])
            ids = np.array([e.ids for e in enc], dtype=np.int64); am = np.array([e.attention_mask for e in enc], dtype=np.int64)
            out.append((idx, self.s.run(None, {"input_ids": ids, "attention_mask": am, "token_type_ids": np.zeros_like(ids)})[0]))
        res = np.zeros((len(texts), out[0][1].shape[1]), np.float32)
        for idx, v in out: res[idx] = v
        return _norm(res)

class Static:
    """numpy-only static model: tokenizer.json (WordPiece) + embedding table; mean of token rows."""
    def __init__(self, path, name):
        from tokenizers import Tokenizer
        from safetensors.numpy import load_file
        w = load_file(f"{path}/model.safetensors")
        self.E = (w["embeddings_i8"].astype(np.float32) * w["scales"]) if "embeddings_i8" in w else w["embeddings"].astype(np.float32)
        self.tok = Tokenizer.from_file(f"{path}/tokenizer.json")
        self.tok.no_padding(); self.tok.no_truncation()
        self.name = name
        vocab = self.tok.get_vocab()
        self.skip = {vocab[t] for t in ("[CLS]", "[SEP]", "[PAD]") if t in vocab}
    def encode(self, texts, batch_size=None):
        texts = list(texts)
        enc = self.tok.encode_batch(texts, add_special_tokens=False)
        lens = np.fromiter((len(e.ids) for e in enc), np.int64, len(enc))
        ids = np.fromiter((i for e in enc for i in e.ids), np.int64)
        rows = np.repeat(np.arange(len(texts)), lens)
        out = np.zeros((len(texts), self.E.shape[1]), np.float32)
        np.add.at(out, rows, self.E[ids]) if len(ids) < 0 else None
        # faster than add.at: sort-free reduceat over contiguous rows
        if len(ids):
            starts = np.concatenate([[0], np.cumsum(lens)[:-1]])
            nz = lens > 0
            s = np.add.reduceat(self.E[ids], starts[nz], axis=0)
            out[nz] = s
        return _norm(out)

def load(name):
    if name == "minilm-st-torch": return STTorch()
    if name == "minilm-ort-fp32": return ORT(f"{R}/onnx/model.onnx", name)
    if name == "minilm-ort-int8": return ORT(f"{R}/onnx/model_int8.onnx", name)
    if name.startswith("static:"): return Static(f"{R}/static/{name[7:]}", name)
    raise KeyError(name)

class TLSM:
    name = "tokenlearn-static-model (PyPI, 10k/64d int8)"
    def __init__(self):
        from static_model import get_embeddings; self.g = get_embeddings
    def encode(self, texts, batch_size=None):
        return _norm(np.asarray(self.g(list(texts)), dtype=np.float32))
_load = load
def load(name):
    return TLSM() if name == "tlsm" else _load(name)
