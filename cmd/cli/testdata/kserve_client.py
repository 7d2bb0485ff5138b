"""Talks to `nitro serve` with the KServe Python SDK's v2 REST client (kserve.InferenceRESTClient).

Usage: kserve_client.py URL < spec.json, with triton_client.py's spec. For every model it calls
is_server_live/ready and is_model_ready, and infers at each batch with JSON data and with binary
data, asking for every output and for one; it prints the same report as triton_client.py for
the calls it makes (each output as shape, datatype and raw little-endian bytes in hex).
"""
import asyncio
import json
import sys

import numpy as np
from kserve import InferenceRESTClient, InferInput, InferRequest, RESTConfig
from kserve.protocol.infer_type import RequestedOutput


def outputs_of(res):
    got = {}
    for o in res.outputs:
        arr = o.as_numpy()
        got[o.name] = {"shape": list(arr.shape), "dtype": str(arr.dtype), "hex": arr.astype("<f4").tobytes().hex()}
    return {"id": res.id, "order": [o.name for o in res.outputs], "outputs": got}


async def main():
    url = sys.argv[1]
    base = "http://" + url
    spec = json.load(sys.stdin)
    client = InferenceRESTClient(RESTConfig(protocol="v2", retries=0))
    report = {"live": await client.is_server_live(base), "ready": await client.is_server_ready(base), "models": {}}
    for name in spec["models"]:
        m = {"ready": await client.is_model_ready(base, name), "infer": {}}
        for batch, rows in spec["inputs"].items():
            x = np.array(rows, dtype=np.float32)
            for mode in ("json", "binary"):
                binary = mode == "binary"
                for ask, names in (("all", ["y", "z"]), ("z", ["z"])):
                    inp = InferInput("x", list(x.shape), "FP32")
                    inp.set_data_from_numpy(x, binary_data=binary)
                    outs = [RequestedOutput(o, parameters={"binary_data": binary}) for o in names]
                    req = InferRequest(model_name=name, infer_inputs=[inp], request_id="req-" + batch, request_outputs=outs)
                    res = await client.infer(base, req, model_name=name)
                    m["infer"][f"{batch}/{mode}/{ask}"] = outputs_of(res)
        report["models"][name] = m
    await client.close()
    print(json.dumps(report))


if __name__ == "__main__":
    asyncio.run(main())
