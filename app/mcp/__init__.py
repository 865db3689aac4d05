"""The MCP (Model Context Protocol) face of the service: ``/mcp``, streamable HTTP.

``endpoint`` authenticates and runs the SDK's transport; ``tools`` maps each tool and resource
to the service call its REST route makes; ``results`` turns answers and refusals into MCP tool
results that carry the REST body or its problem document. Nothing here is imported by the
REST API or the services: only ``app.main`` mounts it.
"""

from app.mcp.endpoint import MCP_PATH, McpEndpoint

__all__ = ["MCP_PATH", "McpEndpoint"]
