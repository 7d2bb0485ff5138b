"""Interop check run by python_test.go: the reference safetensors package opens a record Go
wrote (safe_open, every tensor, metadata a str->str map), then writes a file for Go to read."""
import json
import sys

import numpy as np
import safetensors
from safetensors import safe_open
from safetensors.numpy import save_file

path, expected_path, out_path = sys.argv[1:4]
with open(expected_path) as f:
    expected = json.load(f)

NP = {"F32": np.float32, "F64": np.float64, "F16": np.float16, "I32": np.int32, "I64": np.int64,
      "U8": np.uint8, "BOOL": np.bool_}

with open(path, "rb") as f:
    raw = {name: info for name, info in safetensors.deserialize(f.read())}

with safe_open(path, framework="np") as f:
    meta = f.metadata()
    assert isinstance(meta, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in meta.items()), meta
    rec = json.loads(meta["nitro.record"])
    for k, v in expected["record"].items():
        assert rec[k] == v, (k, rec[k], v)
    names = set(f.keys())
    assert names == {t["name"] for t in expected["tensors"]}, names
    for t in expected["tensors"]:
        name, want = t["name"], bytes.fromhex(t["hex"])
        sl = f.get_slice(name)
        assert sl.get_dtype() == t["dtype"], (name, sl.get_dtype())
        assert list(sl.get_shape()) == t["shape"], (name, sl.get_shape())
        r = raw[name]
        assert r["dtype"] == t["dtype"], (name, r["dtype"])
        assert list(r["shape"]) == t["shape"] and bytes(r["data"]) == want, name
        if t["dtype"] in NP:
            arr = f.get_tensor(name)
            assert arr.dtype == NP[t["dtype"]], (name, arr.dtype)
            assert list(arr.shape) == t["shape"], (name, arr.shape)
            assert arr.astype(arr.dtype.newbyteorder("<")).tobytes() == want, name
print(f"python safetensors {safetensors.__version__}: opened {len(names)} tensors, "
      f"{len(meta)} metadata strings, epoch {rec['epoch']}")

save_file({
    "a": np.arange(6, dtype=np.float32).reshape(2, 3),
    "b": np.array([1, -2, 3], dtype=np.int64),
    "c": np.array([True, False]),
    "h": np.array([1.5], dtype=np.float16),
    "s": np.array(3.25, dtype=np.float64),
}, out_path, metadata={"written_by": "python"})
