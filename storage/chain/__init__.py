"""The metadata chain of a dataset: reading, appending under the chain rules, validating."""

from storage.chain.metadata_chain import MetadataChain
from storage.chain.rules import ChainState
from storage.chain.validate import validate_chain

__all__ = ["ChainState", "MetadataChain", "validate_chain"]
