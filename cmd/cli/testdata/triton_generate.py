"""Asks `nitro serve` to continue prompts with Triton's own Python client (tritonclient.http), as a
user of a served text generator would.

Usage: triton_generate.py URL < spec.json, where spec is {"model": name, "cases": [{"prompt":
text, "parameters": {...}}], "too_long": text}. For the model it calls is_model_ready and
get_model_metadata; for each case, infer with the prompt as BYTES in binary and the text asked
for in binary, then (first case only) as BYTES in JSON and as UINT8 [n], each answer's text as
hex, with the time the request took. Then it sends bad requests and reports each refusal's status
and message. It prints one JSON object.
"""
import json
import sys
import time

import numpy as np
import tritonclient.http as httpclient

from triton_client import refused  # the MNIST test's: a refusal's status and message


def prompt_input(text, mode):
    if mode == "uint8":
        arr = np.frombuffer(text.encode(), dtype=np.uint8)
        inp = httpclient.InferInput("prompt", list(arr.shape), "UINT8")
        inp.set_data_from_numpy(arr, binary_data=False)
        return inp
    inp = httpclient.InferInput("prompt", [1], "BYTES")
    inp.set_data_from_numpy(np.array([text.encode()], dtype=np.object_), binary_data=(mode == "binary"))
    return inp


def generate(client, model, text, parameters, mode):
    binary = mode == "binary"
    outputs = [httpclient.InferRequestedOutput("text", binary_data=binary), httpclient.InferRequestedOutput("tokens", binary_data=binary)]
    start = time.perf_counter()
    result = client.infer(model, [prompt_input(text, mode)], outputs=outputs, parameters=parameters, request_id="gen-1")
    took = time.perf_counter() - start
    text_out = result.as_numpy("text")
    first = text_out[0]  # bytes from binary data, str from JSON
    text_bytes = first.encode() if isinstance(first, str) else bytes(first)
    tokens = result.as_numpy("tokens")
    return {
        "text_hex": text_bytes.hex(),
        "text_shape": list(text_out.shape),
        "tokens_hex": tokens.astype(np.uint8).tobytes().hex(),
        "id": result.get_response().get("id"),
        "seconds": took,
    }


def main():
    url = sys.argv[1]
    spec = json.load(sys.stdin)
    model = spec["model"]
    client = httpclient.InferenceServerClient(url=url)
    report = {
        "ready": client.is_model_ready(model),
        "metadata": client.get_model_metadata(model),
        "cases": [],
    }
    for i, case in enumerate(spec["cases"]):
        got = {"binary": generate(client, model, case["prompt"], case["parameters"], "binary")}
        if i == 0:
            got["json"] = generate(client, model, case["prompt"], case["parameters"], "json")
            got["uint8"] = generate(client, model, case["prompt"], case["parameters"], "uint8")
        report["cases"].append(got)

    def bad(text, parameters):
        return refused(lambda: client.infer(model, [prompt_input(text, "binary")], parameters=parameters))

    report["refused"] = {
        "too_long": bad(spec["too_long"], {"max_tokens": 5}),
        "no_tokens": bad("hi", {"max_tokens": 0}),
        "cold": bad("hi", {"temperature": 0.0}),
        "unknown": bad("hi", {"temprature": 0.5}),
        "top_k": bad("hi", {"top_k": 1000}),
    }
    print(json.dumps(report))


if __name__ == "__main__":
    main()
