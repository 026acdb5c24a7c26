"""Regenerate the descriptors of Triton's protos beside serve/: ``model_config.descriptor.txtpb`` from
``model_config.proto`` and ``grpc_service.descriptor.txtpb`` from ``grpc_service.proto`` (which imports it).

inferperf reads ``config.pbtxt`` with protobuf's ``text_format`` into the ``inference.ModelConfig`` message
built from the first (serve/triton_config.py), so every valid Triton config parses, and serves
``inference.GRPCInferenceService`` with the messages of the second (serve/grpc_service.py). A descriptor is
protoc's output for Triton's own .proto, written as text (readable, diffable, and loadable by any protobuf
runtime, unlike generated ``_pb2`` code that pins the protobuf version it was made with).

Usage (grpcio-tools provides protoc; it is needed only here, not at run time)::

    pip install grpcio-tools
    python scripts/make_triton_descriptor.py PATH/TO/protobuf COMMIT

``PATH/TO/protobuf``: the folder holding both .proto files; ``COMMIT``: the triton-inference-server/common
commit they come from (written in the headers).
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

from google.protobuf import descriptor_pb2, text_format

SERVE = Path(__file__).resolve().parents[1] / "src" / "inferperf" / "workload"
#: .proto -> (the name the descriptor pool knows it by, what it holds)
PROTOS = {"model_config.proto": ("triton/model_config.proto", "package inference"),
          "grpc_service.proto": ("triton/grpc_service.proto", "package inference, service GRPCInferenceService")}


def write(folder: Path, proto: str, commit: str) -> None:
    """protoc ``folder/proto`` into ``serve/<stem>.descriptor.txtpb``, imports renamed as :data:`PROTOS` names."""
    src = folder / proto
    with tempfile.TemporaryDirectory() as tmp:
        desc = Path(tmp) / "out.desc"
        subprocess.run([sys.executable, "-m", "grpc_tools.protoc", f"-I{folder}", f"--descriptor_set_out={desc}",
                        proto], check=True)
        fds = descriptor_pb2.FileDescriptorSet.FromString(desc.read_bytes())
    (fd,) = fds.file
    fd.name, holds = PROTOS[proto]
    deps = [PROTOS[d][0] if d in PROTOS else d for d in fd.dependency]
    del fd.dependency[:]
    fd.dependency.extend(deps)
    notice = [line[3:] if line.startswith("// ") else line[2:] for line in src.read_text().splitlines()
              if line.startswith("//")][:27]  # the .proto's copyright and BSD-3 licence block
    header = [f"# FileDescriptorProto of Triton's {proto} ({holds}), made by protoc from",
              f"# triton-inference-server/common protobuf/{proto} at commit {commit}",
              "# with scripts/make_triton_descriptor.py. The .proto is under this licence (BSD-3-Clause):", "#",
              *[f"# {line}".rstrip() for line in notice], ""]
    out = SERVE / proto.replace(".proto", ".descriptor.txtpb")
    out.write_text("\n".join(header) + text_format.MessageToString(fd))
    print(f"wrote {out} ({len(fd.message_type)} messages, {len(fd.service)} services)")


def main(folder: str, commit: str) -> None:
    for proto in PROTOS:
        write(Path(folder).resolve(), proto, commit)


if __name__ == "__main__":
    main(*sys.argv[1:3])
