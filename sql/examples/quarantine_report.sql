-- Why records were quarantined, and where they are (never silently dropped).
SELECT partition_date, source, reason, count(*) AS records,
       min(source_file || coalesce(':' || source_line, '')) AS first_location
FROM quarantine
GROUP BY ALL
ORDER BY partition_date, source, reason;
