"""The engines' names, for argument parsers that must not import the engines
(``verifier.engine.registry`` builds each one and checks it knows every name here)."""

ENGINE_NAMES = ("datafusion", "spark")
