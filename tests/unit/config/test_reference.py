"""docs/configuration.md is the settings' own reference (config.reference), nested groups included."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import AliasChoices, BaseModel, Field
from pydantic_settings import BaseSettings, EnvSettingsSource, SettingsConfigDict

from config import reference
from config.settings import Settings


def test_the_committed_reference_is_current() -> None:
    assert reference.main(["--check"]) == 0, "run `python -m config.reference` after changing the settings"


def test_every_setting_is_listed_under_the_variable_pydantic_settings_reads() -> None:
    top = next(g for g in reference.groups() if g.path == ())
    fields = {n: f for n, f in Settings.model_fields.items() if reference.group_model(f.annotation) is None}
    source = EnvSettingsSource(Settings)
    read = [tuple(env.upper() for _, env, _ in source._extract_field_info(f, n)) for n, f in fields.items()]
    assert [s.variables for s in top.settings] == read
    text = reference.OUTPUT.read_text()
    for variables in read:
        assert f"| `{variables[0]}`" in text


def test_a_default_under_the_checkout_is_written_relative_to_it() -> None:
    text = reference.render()
    assert "`<repository>/var`" in text
    assert str(reference.PROJECT_ROOT) not in text


class _Tls(BaseModel):
    """TLS of the broker."""

    ca: str = "none"


class _Broker(BaseModel):
    """Where the broker is."""

    port: int = Field(9092, ge=1, description="The broker's port.")
    tls: _Tls = _Tls()


class _Spark(BaseSettings):
    """Spark, read with a prefix of its own."""

    model_config = SettingsConfigDict(env_prefix="T_SPARK_")
    master: str = "local[2]"


class _Nested(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="T_", env_nested_delimiter="__")
    name: str = Field("x", validation_alias=AliasChoices("T_NAME", "T_OLD_NAME"))
    broker: _Broker = _Broker()
    spark: _Spark = Field(default_factory=_Spark)


class _Flat(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="T_")
    broker: _Broker = _Broker()


def _setting(model: type[BaseModel], variable: str) -> reference.Setting:
    return next(s for g in reference.groups(model) for s in g.settings if variable in s.variables)


@pytest.mark.parametrize(
    ("model", "variable", "key", "value", "read"),
    [
        (_Nested, "T_NAME", None, "y", lambda s: s.name),
        (_Nested, "T_OLD_NAME", None, "y", lambda s: s.name),
        (_Nested, "T_BROKER__PORT", None, "1234", lambda s: s.broker.port),
        (_Nested, "T_BROKER__TLS__CA", None, "mine", lambda s: s.broker.tls.ca),
        (_Nested, "T_SPARK_MASTER", None, "yarn", lambda s: s.spark.master),
        (_Flat, "T_BROKER", "port", "1234", lambda s: s.broker.port),
        (_Flat, "T_BROKER", "tls.ca", "mine", lambda s: s.broker.tls.ca),
    ],
)
def test_every_variable_of_a_nested_group_is_the_one_that_sets_it(
    monkeypatch: pytest.MonkeyPatch,
    model: type[BaseSettings],
    variable: str,
    key: str | None,
    value: str,
    read: Any,
) -> None:
    listed = [(s.variables, s.key) for g in reference.groups(model) for s in g.settings]
    assert any(variable in variables and k == key for variables, k in listed)
    if key is None:
        monkeypatch.setenv(variable, value)
    else:  # a group read only as the JSON of its parent's variable
        document: dict[str, Any] = {}
        node = document
        *parents, last = key.split(".")
        for parent in parents:
            node = node.setdefault(parent, {})
        node[last] = value
        monkeypatch.setenv(variable, json.dumps(document))
    assert str(read(model())) == value


def test_nested_groups_get_a_section_each_with_their_docstring() -> None:
    text = reference.render(_Nested)
    assert "\n## broker\n\nWhere the broker is.\n" in text
    assert "\n## broker.tls\n" in text
    assert "\n## spark\n\nSpark, read with a prefix of its own.\n" in text
    assert _setting(_Nested, "T_BROKER__PORT").type == "int, >= 1"
    flat = reference.render(_Flat)
    assert "| `T_BROKER`, JSON key `port` | int, >= 1 | `9092` | The broker's port. |" in flat
    assert "| `T_BROKER`, JSON key `tls.ca` |" in flat
