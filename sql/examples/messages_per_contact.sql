-- Messages, sessions and active days per contact (run after sql/views.sql or on warehouse.duckdb).
SELECT m.contact_id,
       count(*)                        AS messages,
       count(DISTINCT m.local_date)    AS active_days,
       min(m.ts)                       AS first_message,
       max(m.ts)                       AS last_message,
       sum(CASE WHEN m.is_owner THEN 1 ELSE 0 END) AS sent_by_owner
FROM raw_messages AS m
GROUP BY m.contact_id
ORDER BY messages DESC;
