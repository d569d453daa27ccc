-- Dense search in plain DuckDB SQL: exact inner product over the stored, L2-normalized vectors
-- (= cosine similarity), the same ranking as memory_pipeline.search(..., mode="dense").
--
-- Table: chunk_embeddings(chunk_id, representation, piece, provider, model, dim, vector FLOAT[],
-- ...) (the view from sql/views.sql; rows a provider rejected have a NULL vector and are
-- skipped). A text longer than the model window has one row per piece: a chunk scores by its
-- best piece (max-sim), as in the Python API.
--
-- Parameters:
--   $query_vector    FLOAT[]   the query embedded by the SAME provider/model as the vectors
--                              (see chunk_embeddings.model), L2-normalized; in Python:
--                              memory_pipeline.searcher().embed_query("query text", "summary")
--   $representation  VARCHAR   raw_text | summary | embedding_text
--   $k               INTEGER   how many chunks to return
--
-- Python:  con.execute(sql, {"query_vector": vec.tolist(), "representation": "summary", "k": 5})
-- Ties are broken by chunk_id. For corpora beyond ~10^6 vectors use the HNSW index the
-- pipeline builds (indexes/<version>/dense/*.usearch) through the Python API instead.

SELECT chunk_id,
       max(list_inner_product(vector, CAST($query_vector AS FLOAT[]))) AS score
FROM chunk_embeddings
WHERE representation = $representation
  AND vector IS NOT NULL
GROUP BY chunk_id
ORDER BY score DESC, chunk_id
LIMIT $k;
