"""The query engines the coordinator and the verifier share: the contract every engine keeps
(``contract``, ``errors``), the registry that hands them out configured (``registry``), what all
of them write and read through (``output``, ``inputs``, ``replay``, ``cancel``), and one package
per engine (``spark``, ``datafusion``)."""
