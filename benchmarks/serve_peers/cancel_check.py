"""Are requests of clients that went away still executed? (issue 12 item 8; evidence for part C's report)

Run: python benchmarks/serve_peers/cancel_check.py off on  -- wrk -c32 for 2 s against PP-OCRv4 det 640, then
the model rows run (Triton stats) vs the answers wrk got, and the cancelled counter.
"""
import sys, json, tempfile, shlex, time
sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[1]))
from serve import load_models, run_wrk, _probes
from serve_peers.arms import available_arms, get
from serve_peers.bodies import tensors, write_bodies
from pathlib import Path
model = load_models(["zoo:ppocr-det@1x3x640x640"], 8)[0]
for key in sys.argv[1:]:
    arm = next(a for a in available_arms(0, shlex.split("--dynamic-batching --max-queue-delay-us 2000")) if a.key == key)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp); xs = tensors(model.shape, 64)
        b = write_bodies(work / "b", model.input, xs, "binary")
        arm.start(model, work, _probes(model.input, xs[0]))
        st0 = json.loads(get(f"http://127.0.0.1:{arm.port}/v2/models/{model.name}/stats")[1])["model_stats"][0]
        r = run_wrk(f"http://127.0.0.1:{arm.port}", b, f"/v2/models/{model.name}/infer", 32, 2, 1)
        w = arm.wait_idle()
        st1 = json.loads(get(f"http://127.0.0.1:{arm.port}/v2/models/{model.name}/stats")[1])["model_stats"][0]
        m = get(f"http://127.0.0.1:{arm.port}/metrics")[1].decode()
        arm.stop()
        print(key, "wrk completed", r["requests"], "model rows run", st1["inference_count"] - st0["inference_count"],
              "drain_s %.1f" % w, [l for l in m.splitlines() if "cancel" in l and not l.startswith("#")])
