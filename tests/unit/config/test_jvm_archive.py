"""The Spark driver starts from the class-data archive `make setup` built (config.jvm_archive)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from config.jvm_archive import archive_path, java_options
from config.settings import get_settings
from tests.conftest import ROOT

SESSION = """
from config.settings import get_settings
from config.spark import spark_session
spark = spark_session(get_settings(), "archive-check")
spark.range(3).count()
"""


def test_without_an_archive_the_driver_gets_no_flag(tmp_path: Path) -> None:
    settings = get_settings().model_copy(update={"cache_dir": tmp_path})
    assert java_options(settings) == []
    archive_path(settings).parent.mkdir(parents=True)
    archive_path(settings).write_bytes(b"")
    assert java_options(settings) == [f"-XX:SharedArchiveFile={archive_path(settings)}"]
    assert java_options(settings.model_copy(update={"spark_class_archive": False})) == []


def test_the_driver_maps_spark_classes_from_the_archive(tmp_path: Path) -> None:
    """Not only the flag: the JVM really loads Spark's classes from the archive (a JVM that cannot
    map it, say after a Java upgrade, warns and parses every class again)."""
    settings = get_settings()
    path = archive_path(settings)
    assert path.is_file(), f"no class-data archive at {path}: `make setup` builds it"
    loads = tmp_path / "class-load.log"
    options = [*java_options(settings), f"-Xlog:class+load=info:file={loads}"]
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "LAMBDA_SPARK_CONF": json.dumps({"spark.driver.extraJavaOptions": " ".join(options)}),
    }
    subprocess.run(
        [sys.executable, "-c", SESSION], cwd=ROOT, env=env, check=True, capture_output=True, timeout=180
    )
    lines = [line for line in loads.read_text().splitlines() if " org.apache.spark.sql.SparkSession " in line]
    assert lines and all("shared objects file (top)" in line for line in lines), lines
