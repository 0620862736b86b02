"""The KRaft cluster id given to Kafka's storage tool is never read as an option."""

from __future__ import annotations

import base64
import uuid

import pytest

from stack import services


def test_a_cluster_id_never_starts_with_a_dash(monkeypatch: pytest.MonkeyPatch) -> None:
    # The first UUID encodes to an id starting with "-" (0xfb... -> "-..."); it must be drawn again.
    dashed = uuid.UUID(bytes=bytes([0xFB]) + bytes(15))
    plain = uuid.UUID(bytes=bytes([0x10]) + bytes(15))
    assert base64.urlsafe_b64encode(dashed.bytes).decode().startswith("-")
    draws = iter([dashed, plain])
    monkeypatch.setattr(services.uuid, "uuid4", lambda: next(draws))
    cluster_id = services._kafka_cluster_id()
    assert cluster_id == base64.urlsafe_b64encode(plain.bytes).rstrip(b"=").decode()
    assert len(cluster_id) == 22
