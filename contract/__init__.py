"""The event contract: model, JSON codec and the Spark schema derived from the model."""

from contract.codec import ContractError, decode, encode, validate
from contract.events import SCHEMA_VERSION, PageView, TimeBounds, normalize_url, site_of

__all__ = [
    "SCHEMA_VERSION",
    "ContractError",
    "PageView",
    "TimeBounds",
    "decode",
    "encode",
    "normalize_url",
    "site_of",
    "validate",
]
