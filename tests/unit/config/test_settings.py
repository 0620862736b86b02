"""Settings.to_env: what a subprocess is given reads back as the very same settings."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from pydantic import SecretStr

from config.settings import Settings


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """No LAMBDA_* variable of this process (the test session sets some) leaks into Settings()."""
    for name in [n for n in os.environ if n.startswith("LAMBDA_")]:
        monkeypatch.delenv(name)
    return monkeypatch


def read_back(env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> Settings:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return Settings()


def test_every_field_round_trips_through_the_environment(
    tmp_path: Path, clean_env: pytest.MonkeyPatch
) -> None:
    settings = Settings(
        var_dir=tmp_path / "var",
        kafka_port=29092,
        mongo_uri=None,
        master_path=(tmp_path / "master").as_uri(),
        filter_table_path=(tmp_path / "filters").as_uri(),
        filter_table=False,
        retire_grace_s=0.0,
        spark_conf={"spark.sql.adaptive.enabled": "false", "spark.x": "a b"},
        speed_trigger_s=0.25,
        speed_max_offsets_per_trigger=None,
        api_key=SecretStr("s3cret"),
        spark_python=None,
    )
    env = settings.to_env()
    assert env["LAMBDA_VAR_DIR"] == str(tmp_path / "var")
    assert env["LAMBDA_API_KEY"] == "s3cret"
    assert read_back(env, clean_env) == settings


def test_the_defaults_round_trip(clean_env: pytest.MonkeyPatch) -> None:
    settings = Settings()
    assert read_back(settings.to_env(), clean_env) == settings


def test_named_fields_only(clean_env: pytest.MonkeyPatch) -> None:
    settings = Settings(redis_db=3, mongo_uri="mongodb://db.example:27017/")
    env = settings.to_env("redis_db", "mongo_uri")
    assert env == {"LAMBDA_REDIS_DB": "3", "LAMBDA_MONGO_URI": "mongodb://db.example:27017/"}
    back = read_back(env, clean_env)
    assert (back.redis_db, back.mongo_uri) == (3, "mongodb://db.example:27017/")


def test_an_unknown_field_is_an_error() -> None:
    with pytest.raises(ValueError, match="not settings: no_such_field"):
        Settings().to_env("no_such_field")


def test_none_overrides_a_value_the_parent_process_has(clean_env: pytest.MonkeyPatch) -> None:
    """A subprocess environment is the parent's plus to_env(): None must win over the parent's."""
    clean_env.setenv("LAMBDA_MONGO_URI", "mongodb://elsewhere:27017/")
    assert read_back(Settings(mongo_uri=None).to_env("mongo_uri"), clean_env).mongo_uri is None


def test_the_filter_table_lives_under_var_unless_told(tmp_path: Path, clean_env: pytest.MonkeyPatch) -> None:
    settings = Settings(var_dir=tmp_path / "var")
    assert settings.filter_table and settings.filter_table_uri == (tmp_path / "var" / "filters").as_uri()
    clean_env.setenv("LAMBDA_FILTER_TABLE_PATH", "/mnt/shared/filters")
    clean_env.setenv("LAMBDA_FILTER_TABLE", "false")
    moved = Settings()
    assert moved.filter_table_uri == "/mnt/shared/filters" and not moved.filter_table
