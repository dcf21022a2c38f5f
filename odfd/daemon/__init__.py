"""``odfd daemon``: one asyncio process that serves the node's datasets, keeps mirrors in sync,
audits datasets, reconciles declarative resources and answers a local admin API."""
