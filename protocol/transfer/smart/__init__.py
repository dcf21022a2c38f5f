"""Smart Transfer Protocol (RFC-008): message dataclasses with their JSON wire form, and the
metadata tarball. Transport (WebSocket) lives with the server and the sync client."""
