"""Does a new tensor shape cost a GPU step ~0.4 s, and is cuDNN's attention the cause?
Random-initialised models (the CPU recipe's d256 and multi30k.yaml's d512), bf16 autocast:
a training step (forward+backward) and an incremental greedy decode, first at shapes never seen,
then the same shapes again. argv[1]: on|off (cuDNN SDPA)."""
import json, sys, time
import torch
from transformer_mt.config import ModelConfig
from transformer_mt.model.transformer import Transformer
from transformer_mt.data.batch import source_mask

from torch.nn.attention import SDPBackend
from transformer_mt import precision
from transformer_mt.precision import autocast, use_precision_policy
mode = sys.argv[1]
if mode == "on":  # torch's own choice, cuDNN included (as before the change)
    precision.CUDA_ATTENTION_KERNELS = [SDPBackend.CUDNN_ATTENTION, SDPBackend.FLASH_ATTENTION,
                                        SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]
dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
out = {"cudnn_sdp": mode, "torch": torch.__version__}

def sync():
    if dev.type == "cuda": torch.cuda.synchronize()

def train_step(model, b, s, t):
    src = torch.randint(4, 8000, (b, s), device=dev); src[-1, s // 2:] = 0
    tgt = torch.randint(4, 8000, (b, t + 1), device=dev)
    with autocast(dev, "bf16"):
        loss = model(src, tgt[:, :-1], source_mask(src), tgt[:, 1:])
    loss.backward()

for name, d, ff, h in [("d256", 256, 1024, 4), ("d512", 512, 2048, 8)]:
    torch.manual_seed(0)
    model = use_precision_policy(Transformer(ModelConfig(d_model=d, d_ff=ff, n_heads=h), 8000, 8000, 0, True)).to(dev)
    train_step(model, 8, 7, 7); sync()  # CUDA context, cuBLAS handles
    shapes = [(64 + 3 * i, 20 + i, 21 + i) for i in range(int(sys.argv[2]) if len(sys.argv) > 2 else 10)]
    rounds = []
    for r in range(2):
        times = []
        for b, s, t in shapes:
            sync(); t0 = time.perf_counter(); train_step(model, b, s, t); sync()
            times.append(round((time.perf_counter() - t0) * 1000, 2))
        rounds.append(times)
    out[name + "_train_ms_first"] = rounds[0]
    out[name + "_train_ms_again"] = rounds[1]
    # decoding: the reference forward on a growing prefix, 30 steps (key length new each step)
    model.eval()
    for r in range(2):
        src = torch.randint(4, 8000, (32, 18 + r * 0), device=dev)
        sync(); t0 = time.perf_counter()
        with torch.no_grad(), autocast(dev, "bf16"):
            mask = source_mask(src); mem = model.encode(src, mask)
            ys = torch.full((32, 1), 2, device=dev)
            for step in range(30):
                logits = model.decode(ys, mem, mask)[:, -1]
                ys = torch.cat([ys, logits.argmax(-1, keepdim=True)], 1)
        sync()
        out[f"{name}_decode30_ms_round{r}"] = round((time.perf_counter() - t0) * 1000, 1)
print(json.dumps(out))
