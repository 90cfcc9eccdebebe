"""Does a new tensor shape cost a GPU step ~0.4 s, and is cuDNN's attention the cause?

Random-initialised models (the CPU recipe's d256 and multi30k.yaml's d512), bf16 autocast
through ``precision.autocast`` (as training and decoding run): a training step (forward and
backward) at shapes never seen, then at the same shapes again; 30 greedy steps of the
reference forward at batch 32, twice. argv[1]: ``on`` (cuDNN's attention allowed, as before
commit fd32430) or ``off`` (the code as it is); argv[2]: how many training shapes (10).
Run as ``python3 cudnn_shapes.py off 6`` from the repository root (session 24's run: run.sh).
"""

import json
import sys
import time

import torch
from torch.nn.attention import SDPBackend

from transformer_mt import precision
from transformer_mt.config import ModelConfig
from transformer_mt.data.batch import source_mask
from transformer_mt.model.transformer import Transformer
from transformer_mt.precision import autocast, use_precision_policy

mode = sys.argv[1]
n_shapes = int(sys.argv[2]) if len(sys.argv) > 2 else 10
if mode == "on":  # torch's own choice, cuDNN included (as before the change)
    precision.CUDA_ATTENTION_KERNELS = [SDPBackend.CUDNN_ATTENTION, SDPBackend.FLASH_ATTENTION,
                                        SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]
dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
out: dict = {"cudnn_sdp": mode, "torch": torch.__version__}


def sync() -> None:
    if dev.type == "cuda":
        torch.cuda.synchronize()


def train_step(model: Transformer, b: int, s: int, t: int) -> None:
    src = torch.randint(4, 8000, (b, s), device=dev)
    src[-1, s // 2:] = 0  # padding: a masked attention
    tgt = torch.randint(4, 8000, (b, t + 1), device=dev)
    with autocast(dev, "bf16"):
        loss = model(src, tgt[:, :-1], source_mask(src), tgt[:, 1:])
    loss.backward()


for name, d, ff, h in [("d256", 256, 1024, 4), ("d512", 512, 2048, 8)]:
    torch.manual_seed(0)
    config = ModelConfig(d_model=d, d_ff=ff, n_heads=h)
    model = use_precision_policy(Transformer(config, 8000, 8000, 0, True)).to(dev)
    train_step(model, 8, 7, 7)  # the CUDA context, cuBLAS's handles
    sync()
    shapes = [(64 + 3 * i, 20 + i, 21 + i) for i in range(n_shapes)]
    for label in ("first", "again"):
        times = []
        for b, s, t in shapes:
            sync()
            start = time.perf_counter()
            train_step(model, b, s, t)
            sync()
            times.append(round((time.perf_counter() - start) * 1000, 2))
        out[f"{name}_train_ms_{label}"] = times
    model.eval()
    for r in range(2):  # the key length is new at every step of the first round
        src = torch.randint(4, 8000, (32, 18), device=dev)
        sync()
        start = time.perf_counter()
        with torch.no_grad(), autocast(dev, "bf16"):
            mask = source_mask(src)
            memory = model.encode(src, mask)
            ys = torch.full((32, 1), 2, device=dev)
            for _ in range(30):
                logits = model.decode(ys, memory, mask)[:, -1]
                ys = torch.cat([ys, logits.argmax(-1, keepdim=True)], 1)
        sync()
        out[f"{name}_decode30_ms_round{r}"] = round((time.perf_counter() - start) * 1000, 1)
print(json.dumps(out))
