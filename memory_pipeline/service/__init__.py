"""The memory as a service: an authenticated HTTP API and an MCP server over the published
index (``memory-pipeline serve`` / ``memory-pipeline mcp``; docs/service.md).

Thin over the Python API (``memory_pipeline.search_with`` / ``context_with``): the service
adds keys, owners taken from the key, the index version pinned per request, and the limits
a hostile client meets. Nothing here is imported by ``import memory_pipeline``: FastAPI,
uvicorn and the MCP SDK load only when a server starts.
"""

# searches running at once in one worker process. A search holds the GIL most of its time,
# so threads add no CPU (worker processes do); 1, 2 and 8 measured alike within the noise
# of a shared 2-core machine (benchmarks/results/service.md)
DEFAULT_THREADS = 8
