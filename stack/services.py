"""The three services of the local stack, each a process we start, probe and stop ourselves.

One class per service, one small interface (`prepare`, `command`, `probe`, `signature`), in the
spirit of one module per backend: adding a service means one class and one registration.
"""

from __future__ import annotations

import base64
import shutil
import socket
import subprocess
import uuid
from abc import ABC, abstractmethod
from pathlib import Path

from config.settings import Settings
from stack.supervisor import Supervised


class ServiceError(RuntimeError):
    """A service could not be prepared or did not come up."""


def _kafka_cluster_id() -> str:
    """A random KRaft cluster id, as Kafka's own ``Uuid.randomUuid`` makes one.

    The id is a UUID in URL-safe base64. One that starts with ``-`` would be read by the storage
    tool's argument parser as an option (about one format in 64), so, like Kafka, draw again.
    """
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not cluster_id.startswith("-"):
            return cluster_id


def port_open(host: str, port: int, timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


class Service(ABC):
    """A locally run server. Subclasses say how to run it and how to ask it whether it is ready."""

    name: str

    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    @property
    def data_dir(self) -> Path:
        return self.settings.var_dir / self.name

    @property
    def log_file(self) -> Path:
        return self.settings.log_dir / f"{self.name}.log"

    @property
    def pid_file(self) -> Path:
        return self.settings.run_dir / f"{self.name}.pid"

    @property
    def supervised(self) -> Supervised:
        """Its process, as the supervisor knows it: the pid file and the command line signature."""
        return Supervised(self.name, self.pid_file, self.signature())

    @property
    @abstractmethod
    def address(self) -> tuple[str, int]: ...

    @abstractmethod
    def command(self) -> list[str]:
        """The argv that runs the server in the foreground."""

    @abstractmethod
    def signature(self) -> str:
        """A string found in the command line of our process, checked before we signal a pid."""

    def environment(self) -> dict[str, str] | None:
        """The process environment; None inherits ours."""
        return None

    def prepare(self) -> None:
        """One-time work before the first start (directories, formatted storage)."""
        self.data_dir.mkdir(parents=True, exist_ok=True)

    @abstractmethod
    def probe(self) -> None:
        """Raise unless the server answers a real request (not just an open port)."""


class Kafka(Service):
    """Apache Kafka in KRaft mode, one node acting as broker and controller."""

    name = "kafka"

    @property
    def address(self) -> tuple[str, int]:
        return self.settings.kafka_host, self.settings.kafka_port

    @property
    def libs(self) -> Path:
        return self.settings.cache_dir / "kafka" / "libs"

    @property
    def config_file(self) -> Path:
        return self.data_dir / "server.properties"

    def signature(self) -> str:
        return "kafka.Kafka"

    def _properties(self) -> str:
        s = self.settings
        return "\n".join(
            [
                "process.roles=broker,controller",
                "node.id=1",
                f"controller.quorum.voters=1@{s.kafka_host}:{s.kafka_controller_port}",
                f"listeners=PLAINTEXT://{s.kafka_host}:{s.kafka_port},CONTROLLER://{s.kafka_host}:{s.kafka_controller_port}",
                f"advertised.listeners=PLAINTEXT://{s.kafka_host}:{s.kafka_port}",
                "controller.listener.names=CONTROLLER",
                "inter.broker.listener.name=PLAINTEXT",
                "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
                f"log.dirs={self.data_dir / 'data'}",
                f"num.partitions={s.topic_partitions}",
                "auto.create.topics.enable=false",
                "offsets.topic.replication.factor=1",
                "offsets.topic.num.partitions=4",
                "transaction.state.log.replication.factor=1",
                "transaction.state.log.min.isr=1",
                "share.coordinator.state.topic.replication.factor=1",
                "share.coordinator.state.topic.min.isr=1",
                "group.initial.rebalance.delay.ms=0",
                "num.network.threads=2",
                "num.io.threads=4",
                # One machine, one replica: the durability of a write is the OS page cache plus
                # the broker's own flush policy, as with any single-node Kafka.
                "",
            ]
        )

    def _log4j(self) -> str:
        log = self.log_file
        return "\n".join(
            [
                "status = warn",
                "appender.file.type = RollingFile",
                "appender.file.name = file",
                f"appender.file.fileName = {log}",
                f"appender.file.filePattern = {log}.%i",
                "appender.file.layout.type = PatternLayout",
                "appender.file.layout.pattern = [%d] %p %m (%c)%n",
                "appender.file.policies.type = Policies",
                "appender.file.policies.size.type = SizeBasedTriggeringPolicy",
                "appender.file.policies.size.size = 50MB",
                "appender.file.strategy.type = DefaultRolloverStrategy",
                "appender.file.strategy.max = 3",
                "rootLogger.level = info",
                "rootLogger.appenderRef.file.ref = file",
                "logger.kafka.name = kafka",
                "logger.kafka.level = info",
                "logger.apache.name = org.apache.kafka",
                "logger.apache.level = warn",
                "",
            ]
        )

    def _java(self, main: str, *args: str) -> list[str]:
        if not self.libs.is_dir():
            raise ServiceError(f"Kafka jars not found under {self.libs}: run `make setup` first")
        java = shutil.which("java")
        if java is None:
            raise ServiceError("java not found on PATH (Java 17 is required)")
        return [
            java,
            f"-Xmx{self.settings.kafka_heap}",
            "-Xms256m",
            "-XX:+UseG1GC",
            "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={self.data_dir / 'log4j2.properties'}",
            f"-Dkafka.logs.dir={self.settings.log_dir}",
            "-cp",
            f"{self.libs}/*",
            main,
            *args,
        ]

    def prepare(self) -> None:
        super().prepare()
        self.config_file.write_text(self._properties())
        (self.data_dir / "log4j2.properties").write_text(self._log4j())
        if (self.data_dir / "data" / "meta.properties").exists():
            return
        cluster_id = _kafka_cluster_id()
        argv = self._java("kafka.tools.StorageTool", "format", "-t", cluster_id, "-c", str(self.config_file))
        result = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
        if result.returncode != 0:
            raise ServiceError(f"formatting Kafka storage failed:\n{result.stdout}\n{result.stderr}")

    def command(self) -> list[str]:
        return self._java("kafka.Kafka", str(self.config_file))

    def probe(self) -> None:
        host, port = self.address
        if not port_open(host, port):
            raise ServiceError(f"nothing listens on {host}:{port}")
        from confluent_kafka.admin import AdminClient

        admin = AdminClient({"bootstrap.servers": f"{host}:{port}", "log_level": 2})
        metadata = admin.list_topics(timeout=3)
        if not metadata.brokers:
            raise ServiceError("metadata request returned no brokers")


class FerretDB(Service):
    """FerretDB 1.x on SQLite: the MongoDB wire protocol for the local stack."""

    name = "ferretdb"

    @property
    def address(self) -> tuple[str, int]:
        return self.settings.mongo_host, self.settings.mongo_port

    @property
    def binary(self) -> Path:
        return self.settings.cache_dir / "bin" / "ferretdb"

    def signature(self) -> str:
        return str(self.binary)

    def command(self) -> list[str]:
        if not self.binary.exists():
            raise ServiceError(f"{self.binary} not found: run `make setup` first")
        host, port = self.address
        return [
            str(self.binary),
            f"-listen-addr={host}:{port}",
            f"-sqlite-dir={self.data_dir}",
            "-log-level=error",
        ]

    def probe(self) -> None:
        from pymongo import MongoClient

        host, port = self.address
        client: MongoClient[dict[str, object]] = MongoClient(
            host, port, serverSelectionTimeoutMS=2000, connectTimeoutMS=1000, directConnection=True
        )
        try:
            client.admin.command("ping")
        finally:
            client.close()


class Redis(Service):
    """Debian's redis-server with the append-only file on, so a restart keeps realtime views."""

    name = "redis"

    @property
    def address(self) -> tuple[str, int]:
        return self.settings.redis_host, self.settings.redis_port

    def signature(self) -> str:
        return "redis-server"

    def command(self) -> list[str]:
        binary = shutil.which("redis-server") or "/usr/bin/redis-server"
        if not Path(binary).exists():
            raise ServiceError("redis-server not found: run `make setup` first")
        host, port = self.address
        return [
            binary,
            "--bind",
            host,
            "--port",
            str(port),
            "--dir",
            str(self.data_dir),
            "--appendonly",
            "yes",
            "--appendfsync",
            "everysec",
            "--save",
            "",
            "--daemonize",
            "no",
            "--protected-mode",
            "yes",
            "--logfile",
            str(self.log_file),
        ]

    def probe(self) -> None:
        import redis

        host, port = self.address
        client = redis.Redis(host=host, port=port, socket_timeout=2, socket_connect_timeout=1)
        try:
            if not client.ping():
                raise ServiceError("PING did not answer PONG")
        finally:
            client.close()


SERVICES: tuple[type[Service], ...] = (Kafka, FerretDB, Redis)


def all_services(settings: Settings) -> list[Service]:
    return [cls(settings) for cls in SERVICES]


# --- the local Spark standalone cluster (make cluster-up) ----------------------------------------


def spark_home() -> Path:
    """The Spark distribution pyspark ships (bin/spark-class, jars/), without starting a JVM."""
    import importlib.util

    spec = importlib.util.find_spec("pyspark")
    if spec is None or spec.origin is None:
        raise ServiceError("pyspark is not installed: run `make setup` first")
    home = Path(spec.origin).parent
    if not (home / "bin" / "spark-class").is_file():
        raise ServiceError(f"{home} has no bin/spark-class")
    return home


class SparkDaemon(Service):
    """A standalone master or worker run by pyspark's own ``bin/spark-class`` in the foreground.

    spark-class ``exec``s the JVM, so the pid we record is the JVM's. The web UIs bind to the
    cluster host (loopback by default) through SPARK_LOCAL_IP.
    """

    main_class: str

    @property
    def log_file(self) -> Path:
        # Spark's default log4j configuration writes to stderr, which control.start sends here.
        return self.settings.log_dir / f"{self.name}.out"

    def environment(self) -> dict[str, str]:
        import os
        import sys

        s = self.settings
        # Without this checkout on PYTHONPATH: executors get the project's code only the way a
        # real cluster's do, from the zip the driver ships (config.spark.project_zip).
        inherited = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        return {
            **inherited,
            "SPARK_HOME": str(spark_home()),
            "SPARK_LOCAL_IP": s.spark_cluster_host,
            "SPARK_LOG_DIR": str(s.log_dir),
            "SPARK_PID_DIR": str(s.run_dir),
            # The daemons only schedule; their own heap stays small (executors get their own JVMs).
            "SPARK_DAEMON_MEMORY": "256m",
            "SPARK_LOCAL_DIRS": str(self.data_dir / "local"),
            # Python workers an executor starts default to the venv running this stack.
            "PYSPARK_PYTHON": s.spark_python or sys.executable,
        }

    def prepare(self) -> None:
        super().prepare()
        (self.data_dir / "local").mkdir(parents=True, exist_ok=True)

    def _spark_class(self, *args: str) -> list[str]:
        return [str(spark_home() / "bin" / "spark-class"), self.main_class, *args]

    def _master_state(self) -> dict[str, object]:
        import json
        import urllib.request

        s = self.settings
        url = f"http://{s.spark_cluster_host}:{s.spark_cluster_webui_port}/json/"
        with urllib.request.urlopen(url, timeout=2) as response:
            state: dict[str, object] = json.load(response)
        return state


class SparkMaster(SparkDaemon):
    name = "spark-master"
    main_class = "org.apache.spark.deploy.master.Master"

    @property
    def address(self) -> tuple[str, int]:
        return self.settings.spark_cluster_host, self.settings.spark_cluster_port

    def signature(self) -> str:
        host, port = self.address
        return f"{self.main_class} --host {host} --port {port} "

    def command(self) -> list[str]:
        s = self.settings
        return self._spark_class(
            "--host",
            s.spark_cluster_host,
            "--port",
            str(s.spark_cluster_port),
            "--webui-port",
            str(s.spark_cluster_webui_port),
        )

    def probe(self) -> None:
        host, port = self.address
        if not port_open(host, port):
            raise ServiceError(f"nothing listens on {host}:{port}")
        status = self._master_state().get("status")
        if status != "ALIVE":
            raise ServiceError(f"master status {status}")


class SparkWorker(SparkDaemon):
    """Worker ``index`` (0-based): one core and a little memory, registered with the local master."""

    main_class = "org.apache.spark.deploy.worker.Worker"

    def __init__(self, settings: Settings, index: int) -> None:
        super().__init__(settings)
        self.index = index
        self.name = f"spark-worker-{index + 1}"

    @property
    def address(self) -> tuple[str, int]:
        return self.settings.spark_cluster_host, self.settings.spark_cluster_port + 1 + self.index

    def signature(self) -> str:
        return f"{self.main_class} --host {self.address[0]} --port {self.address[1]} "

    def command(self) -> list[str]:
        s = self.settings
        host, port = self.address
        return self._spark_class(
            "--host",
            host,
            "--port",
            str(port),
            "--webui-port",
            str(s.spark_cluster_webui_port + 1 + self.index),
            "--cores",
            str(s.spark_worker_cores),
            "--memory",
            s.spark_worker_memory,
            "--work-dir",
            str(self.data_dir / "work"),
            s.spark_cluster_url,
        )

    def probe(self) -> None:
        """Healthy once the master lists this worker (by its port) as ALIVE."""
        host, port = self.address
        if not port_open(host, port):
            raise ServiceError(f"nothing listens on {host}:{port}")
        workers = self._master_state().get("workers")
        assert isinstance(workers, list)
        states = [w.get("state") for w in workers if isinstance(w, dict) and w.get("port") == port]
        if "ALIVE" not in states:
            raise ServiceError(f"not registered with the master ({states or 'unknown'})")


def cluster_services(settings: Settings) -> list[Service]:
    """The local standalone cluster: the master first, then the workers (started in this order)."""
    workers: list[Service] = [SparkWorker(settings, i) for i in range(settings.spark_cluster_workers)]
    return [SparkMaster(settings), *workers]


def container_worker_address(settings: Settings) -> tuple[str, int]:
    """Where a worker in a container listens and what it advertises to the master: the container's
    own address (its host name resolved, which is what Spark would pick by itself) and the master's
    port + 1. Named once, for the worker's command line and its health check alike: a worker does
    not listen on 127.0.0.1, so a check that looked there would never pass."""
    return socket.gethostbyname(socket.gethostname()), settings.spark_cluster_port + 1


def container_worker_listening(settings: Settings, timeout: float = 3.0) -> bool:
    """The container worker's health check: does something accept connections where it listens?"""
    try:
        socket.create_connection(container_worker_address(settings), timeout).close()
    except OSError:
        return False
    return True


def container_worker_argv(settings: Settings) -> list[str]:
    """A worker in the foreground for a container (``python -m stack spark-worker``).

    It registers with ``settings.spark_master`` and offers ``spark_worker_cores`` cores and
    ``spark_worker_memory``; its Python workers run this image's interpreter, so executors have
    exactly the driver's Python and dependencies. It listens on :func:`container_worker_address`.
    """
    if not settings.spark_master.startswith("spark://"):
        raise ServiceError(f"LAMBDA_SPARK_MASTER must be a spark:// URL, not {settings.spark_master}")
    host, port = container_worker_address(settings)
    return [
        str(spark_home() / "bin" / "spark-class"),
        SparkWorker.main_class,
        "--host",
        host,
        "--port",
        str(port),
        "--webui-port",
        str(settings.spark_cluster_webui_port + 1),
        "--cores",
        str(settings.spark_worker_cores),
        "--memory",
        settings.spark_worker_memory,
        "--work-dir",
        str(settings.var_dir / "spark-worker" / "work"),
        settings.spark_master,
    ]
