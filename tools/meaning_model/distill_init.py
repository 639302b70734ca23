"""Step 3: the initial table. model2vec distils all-MiniLM-L6-v2 into one 384-d row per WordPiece
token (each token alone through the transformer, mean pooled), without PCA and without SIF weights,
float32. All 30,522 rows are kept (token_remove_pattern=None), so row i is MiniLM's token id i.

Usage:  python distill_init.py          -> $BUILD/m2v_init/ (model.safetensors, tokenizer.json)
"""
import os, pathlib, time
os.environ["HF_HUB_OFFLINE"] = "1"
import torch
torch.set_num_threads(int(os.environ.get("THREADS", "2")))
from model2vec.distill import distill

BUILD = pathlib.Path(os.environ.get("BUILD", "/tmp/build26"))
t = time.time()
m = distill(model_name=str(BUILD / "models" / "minilm"), pca_dims=None, sif_coefficient=None,
            token_remove_pattern=None, quantize_to="float32", device="cpu")
m.save_pretrained(str(BUILD / "m2v_init"))
print("distilled", m.embedding.shape, f"{time.time() - t:.0f}s", flush=True)
