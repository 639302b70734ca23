import os, sys, time
os.environ["HF_HUB_OFFLINE"] = "1"
from model2vec.distill import distill
for dims in (256, 128):
    for sif in (1e-4, None):
        name = f"m2v_pca{dims}_{'sif' if sif else 'nosif'}"
        t = time.time()
        m = distill(model_name="/tmp/research26/models/minilm", pca_dims=dims, sif_coefficient=sif, quantize_to="float32")
        m.save_pretrained(f"/tmp/research26/static/{name}")
        print(name, f"{time.time() - t:.1f}s", flush=True)
