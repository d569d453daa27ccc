"""Data-quality checks: pure functions over Arrow tables (``checks``), great-expectations suites
(``gx_suites``) and the storage report.
"""
