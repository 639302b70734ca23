# int8 (per-row scale) and float16 copies of a static table; inference dequantises on load.
import sys, shutil, os, numpy as np
from safetensors.numpy import load_file, save_file
src = sys.argv[1]; E = load_file(f"{src}/model.safetensors")["embeddings"].astype(np.float32)
for kind in ("f16", "i8"):
    out = f"{src}_{kind}"; os.makedirs(out, exist_ok=True); shutil.copy(f"{src}/tokenizer.json", out)
    if kind == "f16":
        save_file({"embeddings": E.astype(np.float16)}, f"{out}/model.safetensors")
    else:
        sc = np.abs(E).max(1, keepdims=True) / 127; q = np.round(E / np.maximum(sc, 1e-12)).astype(np.int8)
        save_file({"embeddings_i8": q, "scales": sc.astype(np.float32)}, f"{out}/model.safetensors")
        save_file({"embeddings": (q.astype(np.float32) * sc)}, f"{out}/deq.safetensors")
    print(out, os.path.getsize(f"{out}/model.safetensors"))
