"""The jobs on a real Spark standalone cluster: only the master URL changes.

A master and two one-core workers are started with the same supervision as ``make cluster-up``
(ports shifted by LAMBDA_TEST_PORT_OFFSET). A batch generation and the speed layer run as their own
processes (``python -m batch_layer run``, ``python -m speed_layer run``) with
LAMBDA_SPARK_MASTER=spark://...; their executors run on the workers, with the project code shipped
as a zip and the connector jars through spark.jars. The merged answers (served batch views plus
realtime views) are compared with the oracle's recount of the log, before and after one worker,
executors included, is killed with SIGKILL in the middle of the speed layer's run.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from config.settings import Settings
from stack import control
from stack.services import SparkWorker, cluster_services
from tests.conftest import PORT_OFFSET, ROOT
from tests.integration.conftest import (
    assert_merged_matches,
    isolated_platform,
    platform_env,
    produce,
    traffic,
)
from tests.integration.speed_layer.test_speed_layer import (
    SpeedProcess,
    commit_of,
    live,
    produce_in_background,
    wait_caught_up,
)
from tests.oracle import first_copies, read_log, recount


@pytest.fixture(scope="module")
def cluster(stack: Settings) -> Iterator[Settings]:
    """A master and two workers (1 core, 1 GB each) on loopback; stopped after the module."""
    settings = stack.model_copy(
        update={
            "spark_cluster_port": 7077 + PORT_OFFSET,
            "spark_cluster_webui_port": 18080 + PORT_OFFSET,
            "spark_cluster_workers": 2,
            "spark_worker_cores": 1,
            "spark_worker_memory": "1g",
            "stack_start_timeout_s": 120.0,
        }
    )
    try:
        control.cluster_up(settings)
        yield settings
    finally:
        control.cluster_down(settings)


def cluster_env(settings: Settings) -> dict[str, str]:
    """A job process of this platform whose only difference is the master URL (and small sizes)."""
    small = settings.model_copy(
        update={
            "spark_master": settings.spark_cluster_url,
            "spark_driver_memory": "1g",
            "spark_executor_memory": "640m",
            "spark_shuffle_partitions": 2,
        }
    )
    return {**platform_env(small), "SPARK_LOCAL_IP": settings.spark_cluster_host}


def executor_logs(settings: Settings, worker: int) -> list[Path]:
    """stderr files of the executors a worker launched (work/<app>/<executor>/stderr)."""
    work = settings.var_dir / f"spark-worker-{worker + 1}" / "work"
    return sorted(work.glob("app-*/*/stderr"))


def tasks_ran_on(settings: Settings, worker: int, since: set[Path]) -> bool:
    """Did an executor on this worker, launched after ``since`` was taken, run a task?"""
    return task_lines(settings, worker, since) > 0


def task_lines(settings: Settings, worker: int, since: set[Path]) -> int:
    """Tasks the executors this worker launched after ``since`` was taken have started so far."""
    return sum(
        path.read_text(errors="replace").count("Running task")
        for path in executor_logs(settings, worker)
        if path not in since
    )


def test_batch_and_speed_on_the_cluster_stay_exact_when_a_worker_dies(
    cluster: Settings, tmp_path: Path
) -> None:
    started = time.monotonic()
    with isolated_platform(
        cluster,
        tmp_path,
        redis_db=3,
        speed_trigger_s=0.5,
        speed_max_offsets_per_trigger=500,
        spark_master=cluster.spark_cluster_url,
    ) as platform:
        env = cluster_env(platform)
        before = {p for w in range(2) for p in executor_logs(platform, w)}

        # A batch generation on the cluster over two days of history.
        produce(platform, traffic(seed=41, total=1_500, span_hours=48.0))
        batch = subprocess.run(
            [sys.executable, "-m", "batch_layer", "run"],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=420,
            check=False,
        )
        assert batch.returncode == 0, batch.stdout[-3000:] + batch.stderr[-3000:]
        assert any(tasks_ran_on(platform, w, before) for w in range(2)), "no task ran on an executor"

        # The speed layer on the cluster, with live traffic; one worker dies mid-run.
        before_speed = {p for w in range(2) for p in executor_logs(platform, w)}
        speed = SpeedProcess(platform, tmp_path / "speed.out")
        speed.env = env
        speed.start()
        try:
            producer = produce_in_background(platform, seeds=[42, 43], per_seed=600, pause_s=1.0)
            _wait_for_progress(platform, speed)
            # Kill a worker whose executor has been running the speed layer's tasks.
            working = [w for w in range(2) if tasks_ran_on(platform, w, before_speed)]
            assert working, "no executor ran a task of the speed layer"
            killed, survivor = working[0], 1 - working[0]
            survivor_tasks = task_lines(platform, survivor, before_speed)
            pid = control._owned_pid(SparkWorker(platform, killed))
            assert pid is not None, f"worker {killed + 1} is not running"
            os.killpg(pid, signal.SIGKILL)  # the worker and the executors it launched
            producer.join(120)
            produce(platform, live(seed=45, total=400))
            wait_caught_up(platform, timeout=300)
            assert speed.proc is not None and speed.proc.poll() is None, speed.tail()
            assert speed.stop() == 0, speed.tail()
        finally:
            if speed.proc is not None and speed.proc.poll() is None:
                os.killpg(speed.proc.pid, signal.SIGKILL)
                speed.proc.wait(30)

        # After the loss the work continued on the surviving worker.
        after = task_lines(platform, survivor, before_speed)
        assert after > survivor_tasks, f"worker {survivor + 1} ran no speed-layer task after the loss"

        log = read_log(platform.kafka_bootstrap, platform.events_topic)
        assert_merged_matches(platform, recount(r.event for r in first_copies(log) if r.event))
    print(f"cluster test: {time.monotonic() - started:.0f} s after the cluster was up")


def _wait_for_progress(settings: Settings, speed: SpeedProcess, timeout: float = 300.0) -> Any:
    """Until the speed layer has committed a micro-batch with data (executors are at work)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert speed.proc is not None and speed.proc.poll() is None, speed.tail()
        commit = commit_of(settings)
        if any(commit.offsets.values()):
            return commit
        time.sleep(0.3)
    raise AssertionError(f"the speed layer committed nothing within {timeout:.0f} s:\n{speed.tail()}")


def test_cluster_services_are_the_master_then_the_workers(stack: Settings) -> None:
    names = [s.name for s in cluster_services(stack)]
    assert names == ["spark-master", "spark-worker-1", "spark-worker-2"]
