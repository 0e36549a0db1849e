"""``python -m atoll.onnx run MODEL.onnx --input NAME=FILE.npy ... --out DIR``: see _cli.py."""

import sys

from ._cli import main

sys.exit(main())
