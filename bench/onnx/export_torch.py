"""Real exported models for atoll.onnx: torchvision classifiers and a torch.nn.TransformerEncoder
with seeded random weights (no download), exported with torch.onnx.export, each written as
OUT/NAME.onnx beside a fixed input (OUT/NAME.input.npy) and torch's output for it
(OUT/NAME.torch.npy). The batch dimension is symbolic ("batch").

Run by Debian's interpreter, which has python3-torch and python3-torchvision (torch's PyPI
wheel pulls gigabytes of CUDA libraries; the project's venv has no torch):

    /usr/bin/python3 bench/onnx/export_torch.py --out DIR [--size 64] [--batch 2]
        [--models resnet18,encoder]
"""

from __future__ import annotations

import argparse
import pathlib
import sys

import numpy as np
import torch
import torchvision

# The encoder's shape: 2 layers of d_model 128, 4 heads, feed-forward 512, over 64 tokens.
ENCODER = {"d_model": 128, "nhead": 4, "dim_feedforward": 512, "layers": 2, "tokens": 64}
OPSET = 17  # torch 1.13's newest


def classifier(name: str):
    def build(size: int) -> tuple:
        # A vision transformer's position embeddings are sized for its image size.
        extra = {"image_size": size} if name.startswith("vit_") else {}
        net = getattr(torchvision.models, name)(weights=None, **extra)
        if name.startswith("vit_"):  # torchvision zeroes its head: every output would be 0
            torch.nn.init.normal_(net.heads.head.weight, std=0.02)
        return net, (3, size, size)
    return build


def encoder(size: int) -> tuple:
    layer = torch.nn.TransformerEncoderLayer(
        ENCODER["d_model"], ENCODER["nhead"], ENCODER["dim_feedforward"], dropout=0.0,
        batch_first=True)
    net = torch.nn.TransformerEncoder(layer, ENCODER["layers"], enable_nested_tensor=False)
    return net, (ENCODER["tokens"], ENCODER["d_model"])


MODELS = {"resnet18": classifier("resnet18"),
          "mobilenet_v3_small": classifier("mobilenet_v3_small"),
          "efficientnet_b0": classifier("efficientnet_b0"),
          "vit_b_16": classifier("vit_b_16"),
          "shufflenet_v2_x0_5": classifier("shufflenet_v2_x0_5"),
          "encoder": encoder}


def export(name: str, out: pathlib.Path, size: int, batch: int) -> None:
    torch.manual_seed(0)
    net, item = MODELS[name](size)
    net.eval()
    x = torch.from_numpy(np.random.default_rng(0).standard_normal((batch, *item))
                         .astype(np.float32))
    with torch.no_grad():
        y = net(x)
    # With gradients on, TransformerEncoderLayer takes its composite path (the fused
    # aten::_transformer_encoder_layer_fwd of its inference fast path has no ONNX export).
    torch.onnx.export(net, (x,), str(out / f"{name}.onnx"), input_names=["x"],
                      output_names=["y"], opset_version=OPSET,
                      dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}})
    np.save(out / f"{name}.input.npy", x.numpy())
    np.save(out / f"{name}.torch.npy", y.numpy())
    print(f"{name}: {out / f'{name}.onnx'} input {list(x.shape)} output {list(y.shape)}",
          flush=True)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--size", type=int, default=64, help="the images' height and width")
    ap.add_argument("--batch", type=int, default=2, help="the fixed input's batch")
    ap.add_argument("--models", default="resnet18,encoder",
                    help=f"comma-separated, of {', '.join(MODELS)}")
    args = ap.parse_args()
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(1)
    for name in args.models.split(","):
        if name not in MODELS:
            print(f"export_torch: no model {name!r} (of {', '.join(MODELS)})", file=sys.stderr)
            return 1
        export(name, out, args.size, args.batch)
    return 0


if __name__ == "__main__":
    sys.exit(main())
