-- BM25 search in plain DuckDB SQL: the same top-k and scores as bm25s (within float rounding).
--
-- Table: bm25_postings(representation VARCHAR, token VARCHAR, chunk_id VARCHAR, score FLOAT),
-- one row per (token, chunk) holding that token's precomputed BM25 contribution to the chunk
-- (memory_pipeline.core.indexes.bm25.postings(index) plus a representation column: which text of the
-- chunks was indexed, e.g. 'raw_text'). A query's score is the SUM over its tokens.
--
-- Parameters:
--   $tokens          VARCHAR[]  the query's tokens, made by the index's own tokenizer:
--                               memory_pipeline.core.indexes.bm25.query_tokens(index, "query text")
--                               or `memory-pipeline tokenize "query text"`. Never split the
--                               query yourself: Japanese needs the same analyzer as the corpus.
--   $representation  VARCHAR    which representation's postings to search
--   $k               INTEGER    how many chunks to return
--
-- Repeated tokens count once per occurrence, as in bm25s ("coffee coffee" scores twice
-- "coffee"): that is why the token list is JOINed, not tested with IN. Tokens not in the
-- vocabulary match no row and add nothing; an empty list returns no rows. Only chunks sharing
-- a token with the query are returned; ties are broken by chunk_id.
--
-- Python:  con.execute(sql, {"tokens": tokens, "representation": "raw_text", "k": 10})
-- Shell:   memory-pipeline sql --file sql/bm25_search.sql --query "dog shelter" \
--            --param representation=raw_text --param k=10

WITH query_tokens AS (
    SELECT unnest(CAST($tokens AS VARCHAR[])) AS token
)
SELECT p.chunk_id, SUM(p.score) AS score
FROM query_tokens AS q
JOIN bm25_postings AS p ON p.token = q.token
WHERE p.representation = $representation
GROUP BY p.chunk_id
ORDER BY score DESC, p.chunk_id
LIMIT $k;
