"""The Spark engine: transforms, queries and ingest in Spark (a JVM in the process or a Spark
Connect server), with every setting that could change a result pinned (``settings``)."""
