"""Writes a safetensors file from numpy arrays (the format:
https://github.com/huggingface/safetensors), as safetensors.torch.save_file
would from a state_dict: no PyTorch, no safetensors package."""
import json
import struct

import numpy as np


def save_safetensors(sd, path):
    header, blobs, offset = {"__metadata__": {"format": "pt"}}, [], 0
    codes = {np.dtype(np.float32): "F32", np.dtype(np.int64): "I64", np.dtype(np.float16): "F16"}
    for name, a in sd.items():
        a = np.ascontiguousarray(a)
        header[name] = {"dtype": codes[a.dtype], "shape": list(a.shape), "data_offsets": [offset, offset + a.nbytes]}
        blobs.append(a.tobytes())
        offset += a.nbytes
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
