"""What a non-local master adds to the session, and the local cluster's processes (no JVM started)."""

from __future__ import annotations

import socket
import sys
import zipfile
from pathlib import Path
from urllib.parse import urlparse

from config.settings import Settings
from config.spark import EXECUTOR_PACKAGES, cluster_conf, project_zip
from stack.services import (
    SparkMaster,
    SparkWorker,
    cluster_services,
    container_worker_address,
    container_worker_argv,
    container_worker_listening,
)


def test_cluster_conf_ships_the_code_and_names_the_python(tmp_path: Path) -> None:
    settings = Settings(var_dir=tmp_path, spark_master="spark://127.0.0.1:7077")
    conf = cluster_conf(settings)
    assert conf["spark.pyspark.python"] == sys.executable
    assert conf["spark.executor.memory"] == settings.spark_executor_memory
    assert conf["spark.executor.cores"] == "1"
    archive = Path(urlparse(conf["spark.submit.pyFiles"]).path)
    names = set(zipfile.ZipFile(archive).namelist())
    for package in EXECUTOR_PACKAGES:
        assert f"{package}/__init__.py" in names, package
    assert "speed_layer/job.py" in names and not any(n.startswith(("tests/", "api/")) for n in names)
    # Content-addressed: the same code gives the same file, built once.
    assert project_zip(settings) == archive
    custom = Settings(var_dir=tmp_path, spark_master="yarn", spark_python="/opt/venv/bin/python")
    assert cluster_conf(custom)["spark.pyspark.python"] == "/opt/venv/bin/python"


def test_cluster_processes_bind_their_own_ports(tmp_path: Path) -> None:
    settings = Settings(var_dir=tmp_path, spark_cluster_port=7377, spark_cluster_webui_port=8380)
    master, w1, w2 = cluster_services(settings)
    assert isinstance(master, SparkMaster) and isinstance(w1, SparkWorker) and isinstance(w2, SparkWorker)
    assert [s.address[1] for s in (master, w1, w2)] == [7377, 7378, 7379]
    command = w2.command()
    assert command[1] == "org.apache.spark.deploy.worker.Worker"
    assert command[-1] == "spark://127.0.0.1:7377"
    assert command[command.index("--webui-port") + 1] == "8382"
    assert command[command.index("--cores") + 1] == "1"
    # Signatures tell the two workers apart (the pid check before a signal).
    joined = " ".join(command) + " "
    assert w2.signature() in joined and w1.signature() not in joined
    env = w1.environment()
    assert env["SPARK_LOCAL_IP"] == "127.0.0.1" and env["PYSPARK_PYTHON"] == sys.executable


def test_container_worker_registers_with_the_configured_master(tmp_path: Path) -> None:
    settings = Settings(var_dir=tmp_path, spark_master="spark://spark-master:7077")
    argv = container_worker_argv(settings)
    assert argv[-1] == "spark://spark-master:7077"
    assert argv[argv.index("--port") + 1] == "7078"


def test_container_worker_health_check_probes_the_address_the_worker_listens_on(tmp_path: Path) -> None:
    """The worker binds its container's own address (not 127.0.0.1); the probe looks exactly there:
    it passes while something listens on that address and port, and fails once nothing does."""
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    settings = Settings(
        var_dir=tmp_path, spark_master="spark://spark-master:7077", spark_cluster_port=port - 1
    )
    argv = container_worker_argv(settings)
    host = argv[argv.index("--host") + 1]
    assert (host, int(argv[argv.index("--port") + 1])) == container_worker_address(settings)
    assert host == socket.gethostbyname(socket.gethostname())
    with socket.create_server((host, port)):
        assert container_worker_listening(settings)
    assert not container_worker_listening(settings, timeout=1.0)
