"""One transport per kind of remote, as dulwich has one client per transport: smart HTTP
(``smart_http``), simple HTTP (``simple_http``), a folder (``file``), an S3 bucket (``s3``),
IPFS (``ipfs``) and IPNS (``ipns``), each behind the ``base.Transport`` Protocol and owning its
settings (``settings.TransportSettings``, handed down by the caller).

``url.parse_remote`` turns a remote URL into one of them; pull, push, search, the daemon's head
probe and its scheduler ask the transport, never the URL's scheme
(``tests/test_architecture.py`` checks that nothing outside this package tests one). The
modules import no client library until a remote is really reached, so parsing a URL stays cheap.
"""


def looks_like_url(text: str) -> bool:
    """Whether ``text`` names a remote by URL rather than a dataset by reference (here, not in
    ``url``: a thin client asks before it sends a pull to its daemon, and loads no transport)."""
    return "://" in text
