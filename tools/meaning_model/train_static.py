"""Step 4: train the static table (tokenlearn-style).

The sentence vector of the student is the weighted mean of its WordPiece token rows (no special
tokens), L2-normalised. It is trained (cosine loss, Adam) to match MiniLM's sentence vector
projected by PCA to `dims` (fitted on the training sentences' teacher vectors, centred, then
normalised). The table starts from the model2vec distillation projected on the same PCA axes; a
per-token log-weight (start 0) is learned too and baked into the rows at the end (mean of
weighted rows / sum of weights, normalised == normalised sum of weighted rows). A small L2 pull
towards the initial rows (1e-4) keeps rare tokens near the distilled ones.

The first `--val` sentences of the (shuffled) corpus are held out to report the validation cosine.

Usage:  python train_static.py --teacher $BUILD/teacher_N.npy --out $BUILD/run_name [--dims 256]
            [--epochs 12] [--val 2000] [--bs 256]
Writes  <out>/table_f32.npy (V x dims float32, weights baked in), <out>/train.json (log).
"""
import argparse, json, os, pathlib, time
os.environ["HF_HUB_OFFLINE"] = "1"
import numpy as np, torch

BUILD = pathlib.Path(os.environ.get("BUILD", "/tmp/build26"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--teacher", required=True); ap.add_argument("--out", required=True)
    ap.add_argument("--dims", type=int, default=256); ap.add_argument("--epochs", type=int, default=12)
    ap.add_argument("--val", type=int, default=2000); ap.add_argument("--bs", type=int, default=256)
    ap.add_argument("--lr", type=float, default=2e-3); ap.add_argument("--lr_w", type=float, default=1e-2)
    ap.add_argument("--reg", type=float, default=1e-4); ap.add_argument("--maxlen", type=int, default=128)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--exclude_source", default="", help="drop sentences whose corpus source starts with this")
    a = ap.parse_args()
    torch.set_num_threads(a.threads); torch.manual_seed(0)
    from tokenizers import Tokenizer
    from safetensors.numpy import load_file
    out = pathlib.Path(a.out); out.mkdir(parents=True, exist_ok=True)
    log = {"args": vars(a), "epochs": []}
    t0 = time.time()

    T = np.load(a.teacher).astype(np.float32)
    C = json.load(open(BUILD / "corpus.json"))
    S = C["sentences"][:len(T)]
    if a.exclude_source:
        keep = [i for i, src in enumerate(C["source"][:len(T)]) if not src.startswith(a.exclude_source)]
        T = T[keep]; S = [S[i] for i in keep]
    init = BUILD / "m2v_init"
    E0 = load_file(str(init / "model.safetensors"))["embeddings"].astype(np.float32)     # V x 384
    V = E0.shape[0]
    tok = Tokenizer.from_file(str(init / "tokenizer.json")); tok.no_padding(); tok.no_truncation()
    assert tok.get_vocab_size() == V, (tok.get_vocab_size(), V)

    # PCA of the teacher space on the training sentences
    Ttr = T[a.val:]
    mu = Ttr.mean(0)
    _, sv, Vt = np.linalg.svd(Ttr - mu, full_matrices=False)
    P = Vt[:a.dims].T                                               # 384 x dims
    log["pca_explained"] = float((sv[:a.dims] ** 2).sum() / (sv ** 2).sum())
    tgt = (T - mu) @ P
    tgt /= np.linalg.norm(tgt, axis=1, keepdims=True)
    Einit = E0 @ P

    enc = tok.encode_batch(S, add_special_tokens=False)
    ids = [np.array(e.ids[:a.maxlen], dtype=np.int64) for e in enc]
    lens = np.array([len(x) for x in ids])
    log["tokens_per_sentence"] = float(lens.mean()); log["sentences"] = len(S); log["n_val"] = a.val
    print(f"{len(S)} sentences, {lens.mean():.1f} tokens each, PCA {a.dims} keeps {log['pca_explained']:.3f}, "
          f"prep {time.time() - t0:.0f}s", flush=True)

    def batches(idx, bs):
        for i in range(0, len(idx), bs):
            b = idx[i:i + bs]
            L = max(1, int(lens[b].max()))
            X = np.zeros((len(b), L), np.int64); Mk = np.zeros((len(b), L), np.float32)
            for r, j in enumerate(b):
                X[r, :lens[j]] = ids[j]; Mk[r, :lens[j]] = 1
            yield torch.from_numpy(X), torch.from_numpy(Mk), torch.from_numpy(tgt[b])

    E = torch.nn.Embedding(V, a.dims); E.weight.data = torch.from_numpy(Einit.copy())
    Ew0 = E.weight.data.clone()
    w = torch.nn.Embedding(V, 1); w.weight.data.zero_()
    opt = torch.optim.Adam([{"params": E.parameters(), "lr": a.lr}, {"params": w.parameters(), "lr": a.lr_w}])

    def forward(X, Mk):
        g = torch.exp(w(X).squeeze(-1)) * Mk
        v = (E(X) * g.unsqueeze(-1)).sum(1) / g.sum(1, keepdim=True).clamp(min=1e-6)
        return torch.nn.functional.normalize(v, dim=1)

    val = np.arange(a.val); tr = np.arange(a.val, len(S))

    def val_cos():
        with torch.no_grad():
            c = [(forward(X, Mk) * Y).sum(1) for X, Mk, Y in batches(val, 1024)]
        return float(torch.cat(c).mean()) if c else float("nan")

    v0 = val_cos(); log["init_val_cos"] = v0
    print("init val cos", round(v0, 4), flush=True)
    rng = np.random.default_rng(0)
    for ep in range(a.epochs):
        t = time.time(); rng.shuffle(tr); tot = n = 0
        for X, Mk, Y in batches(tr, a.bs):
            cos = (forward(X, Mk) * Y).sum(1).mean()
            loss = 1 - cos + a.reg * ((E.weight - Ew0) ** 2).sum(1).mean()
            opt.zero_grad(); loss.backward(); opt.step()
            tot += float(cos.detach()) * len(Y); n += len(Y)
        vc = val_cos()
        log["epochs"].append({"epoch": ep, "train_cos": tot / n, "val_cos": vc, "seconds": time.time() - t})
        print(f"epoch {ep} train cos {tot / n:.4f} val cos {vc:.4f} {time.time() - t:.0f}s", flush=True)
        json.dump(log, open(out / "train.json", "w"), indent=1)
    table = (E.weight.data * torch.exp(w.weight.data)).numpy().astype(np.float32)
    np.save(out / "table_f32.npy", table)
    log["seconds"] = time.time() - t0
    json.dump(log, open(out / "train.json", "w"), indent=1)
    print("saved", out / "table_f32.npy", table.shape, f"{log['seconds']:.0f}s", flush=True)


if __name__ == "__main__":
    main()
