"""The JVM flags each job's Spark JVMs get (no JVM started): each layer names its collector."""

from __future__ import annotations

from pathlib import Path

from config.settings import Settings
from config.spark import JAVA_OPTIONS, jvm_flags


def test_both_layers_run_the_throughput_collector_and_other_jvms_java_s_default(tmp_path: Path) -> None:
    settings = Settings(var_dir=tmp_path)
    assert jvm_flags(settings) == [JAVA_OPTIONS]  # a tool's JVM: Java's default collector
    assert jvm_flags(settings, settings.speed_java_options) == [JAVA_OPTIONS, "-XX:+UseParallelGC"]
    assert jvm_flags(settings, settings.batch_java_options) == [JAVA_OPTIONS, "-XX:+UseParallelGC"]


def test_a_job_s_flags_come_after_every_job_s(tmp_path: Path) -> None:
    settings = Settings(var_dir=tmp_path, spark_java_options="-Xss4m -XX:+AlwaysPreTouch")
    assert jvm_flags(settings, "-XX:+UseParallelGC") == [
        JAVA_OPTIONS,
        "-Xss4m -XX:+AlwaysPreTouch",
        "-XX:+UseParallelGC",
    ]
