-- Every chunk with the raw messages it cites (source file and line for each message).
SELECT c.chunk_id, c.chunk_index, m.local_ts, m.sender, m.text, m.source_ref
FROM chunks AS c, unnest(c.message_ids) AS u(message_id)
JOIN raw_messages AS m USING (message_id)
ORDER BY c.local_date, c.chunk_id, m.ts, m.source_order
LIMIT 50;
