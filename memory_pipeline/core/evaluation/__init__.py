"""Evaluation: evaluation sets, metrics with bootstrap CIs, the fusion sweep, the memory and
context-pack evaluation, and the HTML/Markdown report.
"""
