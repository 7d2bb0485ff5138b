"""Load for `make bench`: CLIENTS threads, each with its own client, send batch-BATCH requests back
to back for SECONDS and the script prints {"reqs", "per_sec", "p50_ms", "p99_ms"} as JSON.

Usage: bench_client.py URL MODEL MODE BATCH CLIENTS SECONDS, MODE one of predict (nitro's
/predict through Python's http.client), v2json and v2binary (the Open Inference Protocol through
Triton's tritonclient.http, JSON or binary tensor data). The input is MODEL's first input,
float32 [BATCH, 784]; each thread builds its request once, so the figures are the server's and
the client library's, not numpy's.
"""
import http.client
import json
import sys
import threading
import time
import urllib.parse

import numpy as np
import tritonclient.http as httpclient


def main():
    url, model, mode, batch, clients, seconds = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), float(sys.argv[6])
    host = urllib.parse.urlparse(url).netloc
    x = (np.random.default_rng(1).integers(0, 1000, size=(batch, 784)) / 1000).astype(np.float32)
    lat, lock, errors = [], threading.Lock(), []
    start_at = time.perf_counter() + 0.2

    def worker():
        mine = []
        if mode == "predict":
            conn = http.client.HTTPConnection(host)
            body = json.dumps({"inputs": {"image": x.tolist()}})

            def call():
                conn.request("POST", "/predict", body=body, headers={"Content-Type": "application/json"})
                r = conn.getresponse()
                r.read()
                if r.status != 200:
                    raise RuntimeError(f"/predict: {r.status}")
        else:
            client = httpclient.InferenceServerClient(url=host)
            binary = mode == "v2binary"
            inp = httpclient.InferInput("image", list(x.shape), "FP32")
            inp.set_data_from_numpy(x, binary_data=binary)
            outs = [httpclient.InferRequestedOutput("probs", binary_data=binary)]

            def call():
                client.infer(model, [inp], outputs=outs).as_numpy("probs")
        call()  # warm up, outside the clock
        while time.perf_counter() < start_at:
            time.sleep(0.001)
        end = start_at + seconds
        try:
            while True:
                t0 = time.perf_counter()
                if t0 >= end:
                    break
                call()
                mine.append(time.perf_counter() - t0)
        except Exception as e:  # reported, not hidden: the bench fails on it
            errors.append(repr(e))
        with lock:
            lat.extend(mine)

    threads = [threading.Thread(target=worker) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        print(json.dumps({"error": errors[0]}))
        sys.exit(1)
    lat.sort()
    pct = lambda p: lat[min(len(lat) - 1, int(p * len(lat)))] * 1000
    print(json.dumps({"reqs": len(lat), "per_sec": len(lat) / seconds, "p50_ms": pct(0.50), "p99_ms": pct(0.99)}))


if __name__ == "__main__":
    main()
