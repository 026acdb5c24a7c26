"""Regenerate src/inferperf/serve/model_config.descriptor.txtpb from Triton's model_config.proto.

inferperf reads ``config.pbtxt`` with protobuf's ``text_format`` into the ``inference.ModelConfig`` message
built from this descriptor (serve/triton_config.py), so every valid Triton config parses. The descriptor is
protoc's output for Triton's own .proto, written as text (readable, diffable, and loadable by any protobuf
runtime, unlike generated ``_pb2`` code that pins the protobuf version it was made with).

Usage (grpcio-tools provides protoc; it is needed only here, not at run time)::

    pip install grpcio-tools
    python scripts/make_triton_descriptor.py PATH/TO/model_config.proto COMMIT

``COMMIT``: the triton-inference-server/common commit the .proto comes from (written in the header).
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

from google.protobuf import descriptor_pb2, text_format

OUT = Path(__file__).resolve().parents[1] / "src" / "inferperf" / "serve" / "model_config.descriptor.txtpb"


def main(proto: str, commit: str) -> None:
    src = Path(proto).resolve()
    with tempfile.TemporaryDirectory() as tmp:
        desc = Path(tmp) / "model_config.desc"
        subprocess.run([sys.executable, "-m", "grpc_tools.protoc", f"-I{src.parent}", f"--descriptor_set_out={desc}",
                        src.name], check=True)
        fds = descriptor_pb2.FileDescriptorSet.FromString(desc.read_bytes())
    (fd,) = fds.file
    fd.name = "triton/model_config.proto"
    notice = [line[3:] if line.startswith("// ") else line[2:] for line in src.read_text().splitlines()
              if line.startswith("//")][:27]  # the .proto's copyright and BSD-3 licence block
    header = [f"# FileDescriptorProto of Triton's model_config.proto (package inference), made by protoc from",
              f"# triton-inference-server/common protobuf/model_config.proto at commit {commit}",
              "# with scripts/make_triton_descriptor.py. The .proto is under this licence (BSD-3-Clause):", "#",
              *[f"# {line}".rstrip() for line in notice], ""]
    OUT.write_text("\n".join(header) + text_format.MessageToString(fd))
    print(f"wrote {OUT} ({len(fd.message_type)} messages)")


if __name__ == "__main__":
    main(*sys.argv[1:3])
