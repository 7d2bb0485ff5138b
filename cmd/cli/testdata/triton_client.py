"""Talks to `nitro serve` with Triton's own Python client (tritonclient.http), as a user would.

Usage: triton_client.py URL < spec.json, where spec is {"models": [names], "inputs": {"<batch>":
[[x0, x1], ...]}}. For every model it calls is_server_live/ready, get_server_metadata,
is_model_ready, get_model_metadata, and infer at each batch with JSON data and with binary data,
asking for every output, for one output only, and for none (the client then asks for all, as
binary); it also sends an unknown model and a wrong datatype. It prints one JSON object: what each
call returned, every output as its shape, datatype and raw little-endian bytes in hex, so the Go
test compares bits, not decimal text.
"""
import json
import sys

import numpy as np
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException


def outputs_of(result):
    got = {}
    for o in result.get_response()["outputs"]:
        arr = result.as_numpy(o["name"])
        got[o["name"]] = {"shape": list(arr.shape), "dtype": str(arr.dtype), "hex": arr.astype("<f4").tobytes().hex()}
    return {"id": result.get_response().get("id"), "order": [o["name"] for o in result.get_response()["outputs"]], "outputs": got}


def refused(call):
    try:
        call()
    except InferenceServerException as e:
        return {"status": str(e.status()), "message": e.message()}
    return {"status": "none", "message": "no error"}


def main():
    url = sys.argv[1]
    spec = json.load(sys.stdin)
    client = httpclient.InferenceServerClient(url=url)
    report = {
        "live": client.is_server_live(),
        "ready": client.is_server_ready(),
        "server": client.get_server_metadata(),
        "models": {},
    }
    for name in spec["models"]:
        m = {"ready": client.is_model_ready(name), "ready_v1": client.is_model_ready(name, "1"),
             "metadata": client.get_model_metadata(name), "infer": {}}
        for batch, rows in spec["inputs"].items():
            x = np.array(rows, dtype=np.float32)
            for mode in ("json", "binary"):
                binary = mode == "binary"
                inp = httpclient.InferInput("x", list(x.shape), "FP32")
                inp.set_data_from_numpy(x, binary_data=binary)
                every = [httpclient.InferRequestedOutput(o, binary_data=binary) for o in ("y", "z")]
                m["infer"][f"{batch}/{mode}/all"] = outputs_of(client.infer(name, [inp], outputs=every, request_id="req-" + batch))
                one = [httpclient.InferRequestedOutput("z", binary_data=binary)]
                m["infer"][f"{batch}/{mode}/z"] = outputs_of(client.infer(name, [inp], outputs=one, model_version="1"))
                m["infer"][f"{batch}/{mode}/none"] = outputs_of(client.infer(name, [inp]))
        bad = httpclient.InferInput("x", [1, 2], "FP64")
        bad.set_data_from_numpy(np.zeros((1, 2), dtype=np.float64), binary_data=False)
        m["wrong_datatype"] = refused(lambda: client.infer(name, [bad]))
        report["models"][name] = m
    x = np.zeros((1, 2), dtype=np.float32)
    inp = httpclient.InferInput("x", [1, 2], "FP32")
    inp.set_data_from_numpy(x)
    report["unknown_model"] = refused(lambda: client.infer("no_such_model", [inp]))
    print(json.dumps(report))


if __name__ == "__main__":
    main()
