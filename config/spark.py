"""The SparkSession both layers use, built from settings.

Everything cluster-specific (master URL, memory, extra configuration) comes from settings, so the
same job runs in local mode here and on a standalone, YARN or Kubernetes cluster unchanged.
"""

from __future__ import annotations

import hashlib
import os
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from config.jvm_archive import java_options as archive_options
from config.settings import PROJECT_ROOT, Settings

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


JAVA_OPTIONS = "-Duser.timezone=UTC -XX:-DontCompileHugeMethods"
"""Every JVM of a job, driver and executors alike: buckets are UTC hours and days; and the JIT
compiles every hot method, however large. HotSpot leaves a method of more than 8,000 bytes of
bytecode to its interpreter (``DontCompileHugeMethods``), and Spark's whole-stage code has such
methods: one stage of the shared pass without visits, two with them (Spark reports each when
``spark.sql.codegen.hugeMethodLimit`` is 8000). Interpreted, they doubled what visits add to the
batch pass's time (docs/visits.md, "Cost", has the figures)."""


def session_jars(settings: Settings) -> list[str]:
    """What `make setup` put beside pyspark for every session (``spark.jars``, shipped to a
    cluster's executors too): the Spark Kafka connector jars (pyspark does not bundle them), the
    contract's recogniser of canonical records (toolchain/contract-udf) and the batch layer's
    visits in the scan (toolchain/visit-scan)."""
    jars = []
    for what, jars_dir in (
        ("Spark Kafka connector", settings.spark_jars_dir),
        ("contract recogniser", settings.contract_jars_dir),
        ("visits in the scan", settings.visit_jars_dir),
    ):
        found = sorted(str(p) for p in jars_dir.glob("*.jar")) if jars_dir.is_dir() else []
        if not found:
            raise RuntimeError(f"no {what} jars under {jars_dir}: run `make setup` first")
        jars += found
    return jars


# The packages executors import (the code of the functions Spark ships to Python workers). The
# serving layer and the API never run on executors.
EXECUTOR_PACKAGES = (
    "config",
    "contract",
    "ingest",
    "views",
    "generations",
    "stores",
    "batch_layer",
    "speed_layer",
)


def project_zip(settings: Settings) -> Path:
    """The project's executor-side packages as one zip (spark.submit.pyFiles), rebuilt when they change.

    Executors on other machines have the dependencies (the same venv or image) but not this
    checkout; the zip is content-addressed so that two versions never share a name.
    """
    root = PROJECT_ROOT
    files = sorted(
        path
        for package in EXECUTOR_PACKAGES
        for path in (root / package).rglob("*.py")
        if "__pycache__" not in path.parts
    )
    digest = hashlib.sha256()
    for path in files:
        digest.update(str(path.relative_to(root)).encode())
        digest.update(path.read_bytes())
    target = settings.var_dir / "spark" / f"lambda-src-{digest.hexdigest()[:12]}.zip"
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_suffix(f".{os.getpid()}.tmp")
        with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as zf:
            for path in files:
                zf.write(path, str(path.relative_to(root)))
        partial.replace(target)
    return target


def cluster_conf(settings: Settings) -> dict[str, str]:
    """What a non-local master needs beyond local mode: executor sizes, their Python, our code."""
    conf = {
        "spark.executor.memory": settings.spark_executor_memory,
        "spark.executor.cores": str(settings.spark_executor_cores),
        # Python workers on the executors: the venv (or image) with the project's dependencies.
        "spark.pyspark.python": settings.spark_python or sys.executable,
        "spark.submit.pyFiles": project_zip(settings).resolve().as_uri(),
    }
    # Executors connect back to the driver: advertise the address Spark binds (SPARK_LOCAL_IP).
    if os.environ.get("SPARK_LOCAL_IP"):
        conf["spark.driver.host"] = os.environ["SPARK_LOCAL_IP"]
    return conf


def jvm_flags(settings: Settings, java_options: str = "") -> list[str]:
    """The flags of a job's Spark JVMs: the platform's own, every job's
    (``settings.spark_java_options``), then the job's (``java_options``; the speed layer's are
    ``settings.speed_java_options``). A later value of the same option wins, but the JVM refuses
    two collectors: name a collector in one of the two settings only."""
    return [f for f in (JAVA_OPTIONS, settings.spark_java_options, java_options) if f]


def spark_session(settings: Settings, app_name: str, java_options: str = "") -> SparkSession:
    """Get or create the session. Driver memory and the JVM flags (``settings.spark_java_options``,
    then the job's own ``java_options``) only take effect before the JVM starts."""
    from pyspark.sql import SparkSession

    if settings.spark_master.startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        # Python workers must run the driver's interpreter (the venv), not whatever `python3` is.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    flags = jvm_flags(settings, java_options)
    local_dir = settings.var_dir / "spark"
    local_dir.mkdir(parents=True, exist_ok=True)
    builder = (
        SparkSession.builder.appName(app_name)
        .master(settings.spark_master)
        .config("spark.driver.memory", settings.spark_driver_memory)
        .config("spark.jars", ",".join(session_jars(settings)))
        .config("spark.sql.shuffle.partitions", str(settings.spark_shuffle_partitions))
        .config("spark.default.parallelism", str(settings.spark_shuffle_partitions))
        # Buckets are UTC hours and days: the session time zone must not follow the machine's.
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.local.dir", str(local_dir))
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.sources.partitionOverwriteMode", "dynamic")
        # event_date partitions stay strings ("2026-11-21", "invalid"), never inferred as dates.
        .config("spark.sql.sources.partitionColumnTypeInference.enabled", "false")
        .config("spark.sql.streaming.numRecentProgressUpdates", "1000")
        # The shared pass's HLL aggregation holds one sketch per (view, key, day, hour) of a
        # partition; past 128 of them (the default) Spark sorts the rest instead, which is slower
        # (docs/views.md has the figures).
        .config("spark.sql.objectHashAggregate.sortBased.fallbackThreshold", "262144")
        # The shared pass's per-visitor count has millions of groups per partition: a small "fast"
        # map probed before the real one only misses, so the pass is faster without it
        # (docs/views.md has the figures).
        .config("spark.sql.codegen.aggregate.map.twolevel.enabled", "false")
        .config(
            "spark.driver.extraJavaOptions",
            " ".join([*flags, *archive_options(settings)]),
        )
        .config("spark.executor.extraJavaOptions", " ".join(flags))
    )
    if not settings.spark_master.startswith("local"):
        # PySpark's context takes the Python its workers run from PYSPARK_PYTHON alone (the
        # spark.pyspark.python setting is only turned into it by spark-submit, which we bypass).
        if settings.spark_python:
            os.environ["PYSPARK_PYTHON"] = settings.spark_python
        else:
            os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        for key, value in cluster_conf(settings).items():
            builder = builder.config(key, value)
    else:
        # The layers run the contract's own code in Python workers (contract.spark_schema): they
        # must import this checkout whatever the driver's PYTHONPATH (a cluster gets the code with
        # --py-files, docs/deployment.md).
        builder = builder.config("spark.executorEnv.PYTHONPATH", str(Path(__file__).resolve().parent.parent))
    for key, value in settings.spark_conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    return spark


def hadoop_path(spark: SparkSession, uri: str) -> tuple[Any, Any]:
    """(Hadoop FileSystem, Path) of ``uri``: file access that works for any store Spark supports."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    path = jvm.org.apache.hadoop.fs.Path(uri)
    return path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration()), path


class SparkProgress:
    """Log the progress of Spark's running stages every few seconds while a block runs.

    Long batch steps otherwise go silent for minutes; a line like
    ``absorb: stage 3 42/80 tasks, 12.1 s`` tells an operator the job is alive and how far it is.
    """

    def __init__(
        self,
        spark: SparkSession,
        label: str,
        every_s: float = 5.0,
        detail: Callable[[float], str] | None = None,
    ) -> None:
        """``detail(elapsed_s)``, if given, adds to each line what the stages do not show (the
        batch layer's documents written and their rate)."""
        import threading

        self.spark = spark
        self.label = label
        self.every_s = every_s
        self.detail = detail
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"progress-{label}", daemon=True)
        self._started = 0.0

    def __enter__(self) -> SparkProgress:
        import time

        self._started = time.monotonic()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=2)

    def _run(self) -> None:
        import logging
        import time

        log = logging.getLogger("spark.progress")
        tracker = self.spark.sparkContext.statusTracker()
        while not self._stop.wait(self.every_s):
            parts = []
            for stage_id in tracker.getActiveStageIds():
                info = tracker.getStageInfo(stage_id)
                if info is not None:
                    parts.append(f"stage {stage_id} {info.numCompletedTasks}/{info.numTasks} tasks")
            elapsed = time.monotonic() - self._started
            if self.detail is not None:
                try:
                    parts.append(self.detail(elapsed))
                except Exception as exc:  # a progress line never fails the work it reports on
                    parts.append(f"({exc!r})")
            log.info("%s: %s, %.0f s", self.label, ", ".join(parts) or "between stages", elapsed)
