"""MLServer peer of the serving benchmark (issue 12): a custom ONNX Runtime runtime, one session, intra-op 1.

MLServer's adaptive batching (``max_batch_size``/``max_batch_time`` in model-settings.json, written by
benchmarks/serve.py) merges requests along the first dim before ``predict`` and splits the response.
Runs in the MLServer venv (scripts/install_mlserver.sh): ``PYTHONPATH=<this folder> mlserver start DIR``.
"""
import onnxruntime as ort
from mlserver import MLModel
from mlserver.codecs import NumpyCodec
from mlserver.types import InferenceRequest, InferenceResponse


class OnnxRuntime(MLModel):
    async def load(self) -> bool:
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = 1
        self._sess = ort.InferenceSession(self.settings.parameters.uri, opts, providers=["CPUExecutionProvider"])
        self._out = self._sess.get_outputs()[0].name
        return True

    async def predict(self, payload: InferenceRequest) -> InferenceResponse:
        inp = payload.inputs[0]
        y = self._sess.run([self._out], {inp.name: NumpyCodec.decode_input(inp)})[0]
        return InferenceResponse(model_name=self.name, outputs=[NumpyCodec.encode_output(self._out, y)])
