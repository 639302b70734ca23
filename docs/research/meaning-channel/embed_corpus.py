import json, sys, time, os, numpy as np
sys.path.insert(0, "/tmp/research26"); import encoders
N = int(sys.argv[1]); which = sys.argv[2] if len(sys.argv) > 2 else "minilm-ort-fp32"
S = json.load(open("/tmp/research26/corpus.json"))[:N]
os.makedirs("/tmp/research26/chunks", exist_ok=True)
enc = encoders.load(which); t = time.time()
for i in range(0, len(S), 2048):
    np.save(f"/tmp/research26/chunks/{i:07d}.npy", enc.encode(S[i:i + 2048], batch_size=64).astype(np.float32))
    print(i + 2048, f"{(i + 2048) / (time.time() - t):.0f}/s", flush=True)
