"""The local stack: real probes, restarts that keep data, clear failures."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest
import redis
from confluent_kafka import Consumer, Producer, TopicPartition
from pymongo import MongoClient

from config.settings import Settings
from ingest.topics import delete_topics, ensure_topics
from stack import control
from stack.services import Redis, ServiceError
from tests.conftest import ROOT


def test_ps_reports_every_service_healthy(stack: Settings) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "stack", "ps"], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stdout + result.stderr
    for name in ("kafka", "ferretdb", "redis"):
        assert name in result.stdout
    assert all(s.healthy and s.pid for s in control.status(stack))


def test_up_is_idempotent(stack: Settings) -> None:
    before = {s.name: s.pid for s in control.status(stack)}
    assert control.up(stack) == []
    assert {s.name: s.pid for s in control.status(stack)} == before


def test_restart_keeps_the_data(stack: Settings, unique: str) -> None:
    topic_settings = stack.model_copy(
        update={"events_topic": f"t.keep.{unique}", "dlq_topic": f"t.keepdlq.{unique}"}
    )
    ensure_topics(topic_settings)
    producer = Producer({"bootstrap.servers": stack.kafka_bootstrap, "enable.idempotence": True})
    producer.produce(topic_settings.events_topic, b"kept", b"k")
    assert producer.flush(30) == 0
    mongo: MongoClient[dict[str, object]] = MongoClient(stack.mongo_url)
    mongo["restart_test"]["docs"].insert_one({"_id": unique, "n": 1})
    mongo.close()
    r = redis.Redis(host=stack.redis_host, port=stack.redis_port)
    r.set(f"restart:{unique}", "kept")
    r.close()

    stopped = control.down(stack)
    assert set(stopped) == {"kafka", "ferretdb", "redis"}
    assert all(not s.running for s in control.status(stack))
    control.up(stack)

    r = redis.Redis(host=stack.redis_host, port=stack.redis_port)
    assert r.get(f"restart:{unique}") == b"kept"
    r.close()
    mongo = MongoClient(stack.mongo_url)
    assert mongo["restart_test"]["docs"].find_one({"_id": unique}) == {"_id": unique, "n": 1}
    mongo["restart_test"]["docs"].delete_one({"_id": unique})
    mongo.close()
    consumer = Consumer({"bootstrap.servers": stack.kafka_bootstrap, "group.id": unique})
    consumer.assign(
        [TopicPartition(topic_settings.events_topic, p, 0) for p in range(stack.topic_partitions)]
    )
    got = []
    for _ in range(20):
        msg = consumer.poll(1)
        if msg is not None and msg.error() is None:
            got.append(msg.value())
            break
    consumer.close()
    assert got == [b"kept"]
    delete_topics(topic_settings, [topic_settings.events_topic, topic_settings.dlq_topic])


def test_a_taken_port_fails_clearly(stack: Settings, tmp_path: object) -> None:
    blocker = socket.socket()
    blocker.bind(("127.0.0.1", 0))
    blocker.listen()
    port = blocker.getsockname()[1]
    other = stack.model_copy(update={"redis_port": port, "var_dir": stack.var_dir / "other"})
    try:
        with pytest.raises(ServiceError, match="taken by a process this stack did not start"):
            control.up(other, ["redis"])
    finally:
        blocker.close()


def test_a_service_that_dies_at_start_fails_with_its_log_tail(
    stack: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    other = stack.model_copy(update={"redis_port": 16999, "var_dir": stack.var_dir / "broken"})
    original = Redis.command
    monkeypatch.setattr(Redis, "command", lambda self: [*original(self), "--no-such-option", "x"])
    with pytest.raises(ServiceError) as caught:
        control.up(other, ["redis"])
    message = str(caught.value)
    assert "redis exited with code" in message
    assert "no-such-option" in message  # the tail of the service's own output
    assert control.status(other)[2].running is False
