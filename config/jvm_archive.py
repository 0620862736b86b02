"""A class-data archive of the Spark driver JVM, so every job starts sooner.

A Spark driver loads some 15,000 classes before it runs its first task; on a 2-core machine that
is most of a job's start. Java's class-data sharing (CDS) maps those classes, already parsed and
verified, from an archive instead, written by one run of the code below (the README's "Faster job
starts" has the figures). Every start of the speed layer, a batch run, a rebuild or the test suite's jobs
pays this, so it is worth one minute of ``make setup``.

The archive is a dynamic one (``-XX:ArchiveClassesAtExit``, Java 13 and later): a JVM runs a small
workload of the platform's own code (the contract's parse, the shared pass, Parquet, a stateful
stream) and dumps every class it loaded when it exits. Its name is a digest of what it
depends on (pyspark's version, the connector jars, the Java binary), so an upgrade never meets a
stale archive; a missing archive only means a slower start, and a JVM that cannot use one (another
Java, other JVM flags) warns and runs without it. Production images can build theirs the same way
(``python -m views.jvm_archive``, which runs the workload: it is the platform's own code, above
this package) or leave it out. This module says where the archive is and maps it.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

from config.settings import Settings


def archive_path(settings: Settings) -> Path:
    """Where the archive for this pyspark, these connector jars and this Java lives."""
    import pyspark

    java = shutil.which("java") or "java"
    real = os.path.realpath(java)
    jars = (
        sorted(p.name for p in settings.spark_jars_dir.glob("*.jar"))
        if settings.spark_jars_dir.is_dir()
        else []
    )
    stat = os.stat(real) if os.path.exists(real) else None
    parts = [pyspark.__version__, *jars, real, str(stat.st_mtime_ns if stat else 0)]
    digest = hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]
    return settings.cache_dir / "spark-cds" / f"driver-{digest}.jsa"


def java_options(settings: Settings) -> list[str]:
    """The driver's JVM flag that maps the archive, or nothing when none was built."""
    if not settings.spark_class_archive:
        return []
    path = archive_path(settings)
    return [f"-XX:SharedArchiveFile={path}"] if path.is_file() else []
