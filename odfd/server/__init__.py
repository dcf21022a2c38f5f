"""The node's HTTP server: Simple Transfer Protocol reads, Smart Transfer Protocol WebSockets,
signed object URLs and a read-only listing of served datasets (``odfd serve``)."""
