"""Build, offline, a WordLevel whitespace tokenizer directory for the token-stream peers (issue 30 item 5).

One token per whitespace word: the vocabulary is ``unk`` (a plain word) plus the mock token server's words
(``inferperf.serve.mock_engine.VOCABULARY``) and inferperf's prompt words (``loadgen.gen_target.WORDS``); any
other word is ``unk``, still one token, so a count survives decoding and re-joining the text (what AIPerf and
GuideLLM do with the streamed chunks). Saved as ``tokenizer.json`` (the ``tokenizers`` library's own format,
what ``inferperf load --tokenizer DIR/tokenizer.json`` reads) with ``tokenizer_config.json`` and
``special_tokens_map.json``, so ``transformers.AutoTokenizer.from_pretrained(DIR)`` loads it as a
``PreTrainedTokenizerFast`` with nothing fetched from a hub.

Run with a Python that has ``tokenizers`` (the peer venvs do; the main environment need not)::

    .venv-aiperf/bin/python scripts/make_tokenizer.py DIR
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from tokenizers import Tokenizer, models, pre_tokenizers  # noqa: E402

from inferperf.loadgen.gen_target import WORDS  # noqa: E402
from inferperf.serve.mock_engine import VOCABULARY  # noqa: E402

UNK = "unk"  # a plain word, not a special token: skip_special_tokens=True (GuideLLM) keeps it


def build(out: Path) -> Path:
    """Write the tokenizer directory ``out`` (created if missing) and return it; idempotent."""
    words = [UNK] + sorted(set(VOCABULARY) | set(WORDS))
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token=UNK))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    out.mkdir(parents=True, exist_ok=True)
    tok.save(str(out / "tokenizer.json"))
    (out / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": 1_000_000,
        "clean_up_tokenization_spaces": False}, indent=1) + "\n")  # fmt: skip
    (out / "special_tokens_map.json").write_text("{}\n")
    return out


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python scripts/make_tokenizer.py DIR")
    print(build(Path(sys.argv[1])))
