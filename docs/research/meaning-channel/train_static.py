# tokenlearn-style: fine-tune a static embedding table so that the (weighted) mean of a sentence's
# token rows matches all-MiniLM-L6-v2's sentence vector (PCA-projected), on a corpus that
# MiniLM embedded. Initialised from the model2vec distillation (no SIF), SIF-like token weights
# are learned too. Output: a model2vec-format folder (tokenizer.json + model.safetensors).
import os, sys, json, time, shutil, numpy as np, torch
os.environ["HF_HUB_OFFLINE"] = "1"
torch.set_num_threads(2); torch.manual_seed(0)
from tokenizers import Tokenizer
from safetensors.numpy import load_file, save_file
R = "/tmp/research26"
dims = int(sys.argv[1]); N = int(sys.argv[2]); epochs = int(sys.argv[3]); out = sys.argv[4]
vecs_file = sys.argv[5] if len(sys.argv) > 5 else f"{R}/corpus_minilm-ort-int8_120000.npy"
init = f"{R}/static/m2v_pca384_nosif"
S = json.load(open(sys.argv[6] if len(sys.argv) > 6 else f"{R}/corpus.json"))
T = np.load(vecs_file)[:N]; S = S[:len(T)]
n_val = 3000
tok = Tokenizer.from_file(f"{init}/tokenizer.json"); tok.no_padding(); tok.no_truncation()
E0 = load_file(f"{init}/model.safetensors")["embeddings"].astype(np.float32)   # V x 384 (no PCA)
V = E0.shape[0]
# PCA of the teacher space, fitted on the training sentences' teacher vectors
Ttr = T[n_val:]
mu = Ttr.mean(0); U, s, Vt = np.linalg.svd(Ttr - mu, full_matrices=False)
P = Vt[:dims].T                                                   # 384 x dims
tgt = (T - mu) @ P
tgt /= np.linalg.norm(tgt, axis=1, keepdims=True)
# initial table in that same PCA basis
Einit = (E0 - E0.mean(0)) @ P if False else E0 @ P
enc = tok.encode_batch(S, add_special_tokens=False)
ids = [np.array(e.ids[:128], dtype=np.int64) for e in enc]
def batches(idx, bs):
    for i in range(0, len(idx), bs):
        b = idx[i:i + bs]
        L = max(1, max(len(ids[j]) for j in b))
        X = np.zeros((len(b), L), np.int64); Mk = np.zeros((len(b), L), np.float32)
        for r, j in enumerate(b): X[r, :len(ids[j])] = ids[j]; Mk[r, :len(ids[j])] = 1
        yield torch.from_numpy(X), torch.from_numpy(Mk), torch.from_numpy(tgt[b])
E = torch.nn.Embedding(V, dims); E.weight.data = torch.from_numpy(Einit.copy())
Ew0 = E.weight.data.clone()
# per-token log-weight, initialised from zipf rank like model2vec's SIF (token id order ~ frequency is not true for BERT,
# so start flat)
w = torch.nn.Embedding(V, 1); w.weight.data.zero_()
opt = torch.optim.Adam([{"params": E.parameters(), "lr": 2e-3}, {"params": w.parameters(), "lr": 1e-2}])
def forward(X, Mk):
    g = torch.exp(w(X).squeeze(-1)) * Mk
    v = (E(X) * g.unsqueeze(-1)).sum(1) / g.sum(1, keepdim=True).clamp(min=1e-6)
    return torch.nn.functional.normalize(v, dim=1)
val = np.arange(n_val); tr = np.arange(n_val, len(S))
def val_cos():
    with torch.no_grad():
        c = [(forward(X, Mk) * Y).sum(1) for X, Mk, Y in batches(val, 1024)]
    return float(torch.cat(c).mean())
print("init val cos", round(val_cos(), 4), flush=True)
rng = np.random.default_rng(0)
for ep in range(epochs):
    t = time.time(); rng.shuffle(tr)
    for X, Mk, Y in batches(tr, 256):
        loss = 1 - (forward(X, Mk) * Y).sum(1).mean() + 1e-4 * ((E.weight - Ew0) ** 2).sum(1).mean()
        opt.zero_grad(); loss.backward(); opt.step()
    print("epoch", ep, "val cos", round(val_cos(), 4), f"{time.time() - t:.0f}s", flush=True)
# bake the weights into the table (mean of weighted rows == normalised sum of weighted rows)
table = (E.weight.data * torch.exp(w.weight.data)).numpy().astype(np.float32)
os.makedirs(out, exist_ok=True)
for f in ("tokenizer.json", "config.json"):
    if os.path.exists(f"{init}/{f}"): shutil.copy(f"{init}/{f}", out)
save_file({"embeddings": table}, f"{out}/model.safetensors")
print("saved", out, table.shape)
