-- Sessions that run past midnight: they belong to the date they start on.
SELECT session_id, contact_id, start_local_ts, end_local_ts, message_count,
       round(duration_seconds / 60.0, 1) AS minutes
FROM sessions
WHERE end_local_date > local_date
ORDER BY start_local_ts;
