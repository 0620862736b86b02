"""Static checks of docker-compose.yml and the Dockerfile (no Docker, no services).

PyYAML is not a project dependency, so docker-compose.yml is kept to a strict subset of YAML that the
small parser below reads completely: block mappings and block sequences by indentation, JSON-style
flow lists (``["a", "b"]``), plain or double-quoted scalars, whole-line comments. No anchors, no
multi-line scalars, no single quotes. A file outside that subset fails here before it can confuse
anyone.
"""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
COMPOSE = ROOT / "docker-compose.yml"
DOCKERFILE = ROOT / "Dockerfile"

INFRA_IMAGES = {"kafka": "apache/kafka", "mongo": "mongo", "redis": "redis"}
PROJECT_SERVICES = {"topics", "api", "speed", "batch", "generator"}
# Modules started with `python -m X`: project packages (some are being written alongside this file,
# so only their names are checked against pyproject's package list) and third-party runners.
PROJECT_MODULES = {"ingest", "api", "speed_layer", "batch_layer"}
THIRD_PARTY_MODULES = {"uvicorn"}
# The settings every project service shares; they must agree across services.
COMMON_ENV = (
    "LAMBDA_KAFKA_HOST",
    "LAMBDA_KAFKA_PORT",
    "LAMBDA_MONGO_URI",
    "LAMBDA_REDIS_HOST",
    "LAMBDA_VAR_DIR",
)


# --- the strict-YAML-subset reader --------------------------------------------------------------

YAML_SPECIAL_WORDS = {"y", "n", "yes", "no", "on", "off", "true", "false", "null", "~"}


def _scalar(text: str) -> Any:
    if text.startswith(("[", '"')):
        return json.loads(text)
    assert not text.startswith(("'", "{", "&", "*", "!", "|", ">", "%", "@", "`")), (
        f"outside the subset: {text}"
    )
    assert " #" not in text, f"no trailing comments: {text}"
    # Plain scalars YAML would read as booleans, nulls or floats must be quoted.
    assert text.lower() not in YAML_SPECIAL_WORDS, f"quote it: {text}"
    assert not re.fullmatch(r"[-+]?(\d*\.\d+|\d+\.\d*|\.inf|\.nan)([eE][-+]?\d+)?", text), f"quote it: {text}"
    return int(text) if re.fullmatch(r"-?\d+", text) else text


def _block(lines: list[tuple[int, str]], pos: int, indent: int) -> tuple[Any, int]:
    if lines[pos][1].startswith("- "):
        items = []
        while pos < len(lines) and lines[pos][0] == indent and lines[pos][1].startswith("- "):
            items.append(_scalar(lines[pos][1][2:].strip()))
            pos += 1
        assert pos == len(lines) or lines[pos][0] < indent, f"bad indentation at: {lines[pos][1]}"
        return items, pos
    mapping: dict[str, Any] = {}
    while pos < len(lines) and lines[pos][0] == indent:
        key, sep, rest = lines[pos][1].partition(":")
        assert sep and re.fullmatch(r"[A-Za-z0-9_.-]+", key), f"not a `key: value` line: {lines[pos][1]}"
        assert key not in mapping, f"duplicate key {key}"
        rest = rest.strip()
        pos += 1
        if rest:
            mapping[key] = _scalar(rest)
        elif pos < len(lines) and lines[pos][0] > indent:
            mapping[key], pos = _block(lines, pos, lines[pos][0])
        else:
            mapping[key] = None
    assert pos == len(lines) or lines[pos][0] < indent, f"bad indentation at: {lines[pos][1]}"
    return mapping, pos


def parse_strict_yaml(text: str) -> dict[str, Any]:
    lines = []
    for raw in text.splitlines():
        assert "\t" not in raw, "tabs are not allowed"
        content = raw.strip()
        if content and not content.startswith("#"):
            lines.append((len(raw) - len(raw.lstrip(" ")), content))
    document, pos = _block(lines, 0, 0)
    assert pos == len(lines)
    assert isinstance(document, dict)
    return document


def _compose() -> dict[str, Any]:
    return parse_strict_yaml(COMPOSE.read_text())


def _services() -> dict[str, dict[str, Any]]:
    services: dict[str, dict[str, Any]] = _compose()["services"]
    return services


def _pyproject() -> dict[str, Any]:
    with (ROOT / "pyproject.toml").open("rb") as f:
        return tomllib.load(f)


def _project_packages() -> set[str]:
    includes = _pyproject()["tool"]["setuptools"]["packages"]["find"]["include"]
    return {pattern.rstrip("*") for pattern in includes}


# --- the parser itself ------------------------------------------------------------------------------


def test_parser_reads_the_subset() -> None:
    doc = parse_strict_yaml(
        '# comment\na:\n  b: "x: y"\n  c: ["1", "2"]\n  d:\n    - e\n    - "f"\n  g:\n  n: 12\nh: plain\n'
    )
    assert doc == {"a": {"b": "x: y", "c": ["1", "2"], "d": ["e", "f"], "g": None, "n": 12}, "h": "plain"}
    for outside in (
        "a: no",
        "a: 1.5",
        "a: &anchor x",
        "a: 'single'",
        "a: x # trailing",
        "a:\n\tb: x",
        "a:\n  - x\n    y",
    ):
        with pytest.raises(AssertionError):
            parse_strict_yaml(outside)


# --- docker-compose.yml ----------------------------------------------------------------------------


def test_all_services_present() -> None:
    compose = _compose()
    assert set(compose) <= {"name", "services", "volumes"}
    assert set(compose["services"]) == set(INFRA_IMAGES) | PROJECT_SERVICES


def test_infrastructure_images_are_official_and_pinned() -> None:
    services = _services()
    for name, repository in INFRA_IMAGES.items():
        service = services[name]
        assert "build" not in service
        image, _, tag = service["image"].partition(":")
        assert image == repository, name
        assert tag and tag != "latest", f"{name} must pin a tag: {service['image']}"
        assert service.get("healthcheck", {}).get("test"), f"{name} needs a healthcheck"


def test_kafka_is_a_single_kraft_node_reachable_as_kafka_9092() -> None:
    services = _services()
    env = services["kafka"]["environment"]
    assert env["KAFKA_PROCESS_ROLES"] == "broker,controller"
    assert env["KAFKA_AUTO_CREATE_TOPICS_ENABLE"] == "false"
    assert env["KAFKA_CONTROLLER_QUORUM_VOTERS"].startswith(f"{env['KAFKA_NODE_ID']}@")
    assert "PLAINTEXT://kafka:9092" in env["KAFKA_ADVERTISED_LISTENERS"].split(",")
    for key, value in env.items():
        if key.endswith("REPLICATION_FACTOR") or key.endswith("MIN_ISR"):
            assert value == "1", key
    assert "/opt/kafka/bin/kafka-broker-api-versions.sh" in services["kafka"]["healthcheck"]["test"]
    for name in PROJECT_SERVICES:
        project_env = services[name]["environment"]
        assert (project_env["LAMBDA_KAFKA_HOST"], project_env["LAMBDA_KAFKA_PORT"]) == ("kafka", "9092")


def test_project_services_build_the_image_and_use_only_lambda_settings() -> None:
    services = _services()
    for name in PROJECT_SERVICES:
        service = services[name]
        assert service["build"] == {"context": ".", "dockerfile": "Dockerfile"}, name
        env = service["environment"]
        assert isinstance(env, dict) and env, name
        assert all(key.startswith("LAMBDA_") for key in env), f"{name}: {sorted(env)}"
        assert all(isinstance(value, str) for value in env.values()), f"{name}: quote every value"
    reference = {key: services["topics"]["environment"][key] for key in COMMON_ENV}
    assert reference["LAMBDA_MONGO_URI"] == "mongodb://mongo:27017/"
    assert reference["LAMBDA_REDIS_HOST"] == "redis"
    for name in PROJECT_SERVICES:
        assert {key: services[name]["environment"].get(key) for key in COMMON_ENV} == reference, name


def test_commands_name_known_modules() -> None:
    services = _services()
    dependencies = {
        re.split(r"[\[=<>!~ ]", dep, maxsplit=1)[0] for dep in _pyproject()["project"]["dependencies"]
    }
    packages = _project_packages()
    for name in PROJECT_SERVICES:
        command = services[name]["command"]
        assert isinstance(command, list) and command[:2] == ["python", "-m"], name
        module = command[2]
        assert module in PROJECT_MODULES | THIRD_PARTY_MODULES, f"{name}: unknown module {module}"
        if module in PROJECT_MODULES:
            assert module in packages, f"{module} is not a package of pyproject.toml"
        else:
            assert module in dependencies, f"{module} is not a dependency in pyproject.toml"
    # What exists already must really be runnable with `python -m`.
    assert (ROOT / "ingest" / "__main__.py").is_file()
    # uvicorn serves `api.main:app`: the api package.
    api_command = services["api"]["command"]
    assert api_command[3].split(".")[0] in PROJECT_MODULES
    assert "--host" in api_command and api_command[api_command.index("--host") + 1] == "0.0.0.0"
    assert services["api"]["ports"] == ["8000:8000"]
    assert services["topics"]["command"][2:] == ["ingest", "topics"]


def test_profiles_and_one_shots() -> None:
    services = _services()
    assert services["batch"]["profiles"] == ["batch"]
    assert services["generator"]["profiles"] == ["generator"]
    for name in ("kafka", "mongo", "redis", "topics", "api", "speed"):
        assert "profiles" not in services[name], name
    assert services["topics"]["restart"] == "no"
    assert services["batch"]["restart"] == "no"


def test_dependencies_wait_for_health_or_completion() -> None:
    services = _services()
    for name, service in services.items():
        for target, spec in (service.get("depends_on") or {}).items():
            assert target in services, f"{name} depends on unknown {target}"
            condition = spec["condition"]
            if condition == "service_healthy":
                assert services[target].get("healthcheck"), f"{target} has no healthcheck"
            else:
                assert condition == "service_completed_successfully", f"{name} -> {target}: {condition}"
                assert services[target].get("restart") == "no", f"{target} is not a one-shot"
    assert services["topics"]["depends_on"]["kafka"]["condition"] == "service_healthy"
    for name in ("speed", "batch", "generator"):
        assert services[name]["depends_on"]["topics"]["condition"] == "service_completed_successfully"


def test_named_volumes_are_declared() -> None:
    compose = _compose()
    declared = set(compose["volumes"])
    used = set()
    for service in compose["services"].values():
        for mount in service.get("volumes", []):
            source = mount.split(":", 1)[0]
            assert not source.startswith((".", "/")), f"bind mount in production compose: {mount}"
            used.add(source)
    assert used == declared
    var_dir_mounts = {
        name: service.get("volumes", [])
        for name, service in compose["services"].items()
        if name in {"speed", "batch"}
    }
    for name, mounts in var_dir_mounts.items():
        assert any(mount.endswith(":/data") for mount in mounts), f"{name} needs the var dir volume"


# --- Dockerfile ------------------------------------------------------------------------------------


def test_dockerfile_copies_the_packages_and_runs_unprivileged() -> None:
    text = DOCKERFILE.read_text()
    assert re.search(r"^COPY \. /app/$", text, flags=re.MULTILINE)
    ignored = set((ROOT / ".dockerignore").read_text().split())
    assert {".git", ".cache", "var"} <= ignored  # never bake local data or caches into the image
    assert re.search(r"^FROM python:3\.11-slim", text, flags=re.MULTILINE)
    assert "mvn -B" in text and "toolchain/spark-kafka/pom.xml" in text
    assert "/opt/lambda/spark-jars" in text and "LAMBDA_CACHE_DIR=/opt/lambda" in text
    users = re.findall(r"^USER (\S+)$", text, flags=re.MULTILINE)
    assert users and users[-1] not in {"root", "0"}
    assert "SPARK_LOCAL_IP=" not in text
    assert "ENTRYPOINT" not in text
