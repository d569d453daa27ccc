"""Shared by every stage: content ids, records, the table schemas and store, dates, time and
language helpers, redaction and the warehouse views. Imports nothing else from ``core``.
"""
