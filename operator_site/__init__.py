"""The operator's site package: settings, the ASGI dispatcher, the MCP face, cross-domain reads."""

__version__ = "0.1.0"
