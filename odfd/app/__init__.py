"""The application layer: what each command *does*, as typed use cases on a :class:`Node`.

The CLI, the web console, the daemon and the HTTP servers only translate their requests into
calls of these use cases and their results (and progress events) into responses. ``node`` is
the composition root: one ``Node`` per process, built from the workspace's configuration.
"""
