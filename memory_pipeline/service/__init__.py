"""The memory as a service: an authenticated HTTP API and an MCP server over the published
index (``memory-pipeline serve`` / ``memory-pipeline mcp``; docs/service.md).

Thin over the Python API (``memory_pipeline.search_with`` / ``context_with``): the service
adds keys, owners taken from the key, the index version pinned per request, and the limits
a hostile client meets. Nothing here is imported by ``import memory_pipeline``: FastAPI,
uvicorn and the MCP SDK load only when a server starts.
"""

# searches running at once in one worker process. A search holds the GIL most of its time,
# so threads add no CPU (worker processes do), and searches sharing the GIL cost more CPU
# each (the handoffs) and all finish late; one at a time, in arrival order, answered 100
# searches/s over 8 connections at p50 40-61 ms where 8 threads took 195-684 ms
# (benchmarks/results/search_cpu.md). A key waits for its own previous request first
# (--key-threads), so one key's flood holds at most one place in the queue.
DEFAULT_THREADS = 1
