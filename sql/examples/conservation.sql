-- Reconciliation per partition and source: records read = ingested + quarantined.
SELECT partition_date, source, records_read, ingested, quarantined,
       records_read = ingested + quarantined AS balanced
FROM ingest_audit
ORDER BY partition_date, source;
