"""The serving benchmark's floor peer: a minimal per-request ``session.run`` KServe v2 app (issue 12).

Starlette on uvicorn, stdlib ``json``, no batching, one ONNX Runtime session (intra-op 1). Accepts JSON
tensors and Triton's binary extension (``Inference-Header-Content-Length``) for the model's first input,
answers JSON or, when asked, one binary output. Usage:
    python benchmarks/serve_peers/minimal_app.py MODEL.onnx NAME PORT
"""
import json, sys

import numpy as np, onnxruntime as ort, uvicorn
from starlette.applications import Starlette
from starlette.responses import Response
from starlette.routing import Route

path, name, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
opts = ort.SessionOptions()
opts.intra_op_num_threads = 1
sess = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
DT = {"FP32": np.float32, "INT64": np.int64}


async def infer(request):
    body = await request.body()
    hlen = int(request.headers.get("inference-header-content-length", len(body)))
    head = json.loads(body[:hlen])
    t = head["inputs"][0]
    x = (np.frombuffer(body, DT[t["datatype"]], offset=hlen) if hlen < len(body)
         else np.asarray(t["data"], DT[t["datatype"]])).reshape(t["shape"])
    y = sess.run(None, {t["name"]: x})[0]
    out = {"name": sess.get_outputs()[0].name, "datatype": "FP32", "shape": list(y.shape)}
    if head.get("parameters", {}).get("binary_data_output"):
        out["parameters"] = {"binary_data_size": y.nbytes}
        h = json.dumps({"model_name": name, "outputs": [out]}).encode()
        return Response(h + y.astype(np.float32).tobytes(), headers={"Inference-Header-Content-Length": str(len(h))},
                        media_type="application/octet-stream")
    out["data"] = y.ravel().tolist()
    return Response(json.dumps({"model_name": name, "outputs": [out]}), media_type="application/json")


async def ready(request):
    return Response("", status_code=200)


app = Starlette(routes=[Route(f"/v2/models/{name}/infer", infer, methods=["POST"]), Route("/v2/health/ready", ready)])
if __name__ == "__main__":
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)
