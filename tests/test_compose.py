"""Static checks of docker-compose.yml and the Dockerfile (no Docker engine, no services).

The compose file is read with PyYAML (anchors and merge keys resolved, as Compose does) and checked
against the code itself: every LAMBDA_* variable is a field of Settings, every project command is
``python -m <package> <subcommand>`` that the package's command line accepts, published and
internal ports equal the settings' defaults, every service has a health check, and every piece of
state (the log, the views, the master dataset, the speed layer's checkpoint) is on a named volume.
"""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import yaml

from config.settings import Settings

ROOT = Path(__file__).resolve().parent.parent
COMPOSE = ROOT / "docker-compose.yml"
DOCKERFILE = ROOT / "Dockerfile"

INFRA_IMAGES = {"kafka": "apache/kafka", "mongo": "mongo", "redis": "redis", "spark-master": "spark"}
PROJECT_SERVICES = {"spark-worker", "topics", "api", "speed", "batch", "generator"}
PROJECT_MODULES = {"ingest", "api", "speed_layer", "batch_layer", "stack"}


class _Defaults:
    """The fields' declared defaults (the environment of this test process plays no part)."""

    def __getattr__(self, name: str) -> Any:
        return Settings.model_fields[name].default


DEFAULTS = _Defaults()
FIELDS = set(Settings.model_fields)
# The settings every project service shares; they must agree across services.
COMMON_ENV = (
    "LAMBDA_KAFKA_HOST",
    "LAMBDA_KAFKA_PORT",
    "LAMBDA_MONGO_URI",
    "LAMBDA_REDIS_HOST",
    "LAMBDA_REDIS_PORT",
    "LAMBDA_VAR_DIR",
    "LAMBDA_SPARK_MASTER",
    "LAMBDA_MASTER_PATH",
    "LAMBDA_SPEED_CHECKPOINT_PATH",
)


def _compose() -> dict[str, Any]:
    document = yaml.safe_load(COMPOSE.read_text())
    assert isinstance(document, dict)
    return document


def _services() -> dict[str, dict[str, Any]]:
    services: dict[str, dict[str, Any]] = _compose()["services"]
    return services


def _pyproject() -> dict[str, Any]:
    with (ROOT / "pyproject.toml").open("rb") as f:
        return tomllib.load(f)


def _project_packages() -> set[str]:
    includes = _pyproject()["tool"]["setuptools"]["packages"]["find"]["include"]
    return {pattern.rstrip("*") for pattern in includes}


def _mounts(service: dict[str, Any]) -> dict[str, str]:
    """container path -> named volume."""
    out = {}
    for mount in service.get("volumes", []):
        source, target = mount.split(":")[:2]
        out[target] = source
    return out


def _on_volume(service: dict[str, Any], path: str) -> bool:
    return any(path == target or path.startswith(target.rstrip("/") + "/") for target in _mounts(service))


# --- docker-compose.yml ----------------------------------------------------------------------------


def test_all_services_present() -> None:
    compose = _compose()
    assert set(compose) <= {"name", "services", "volumes"} | {k for k in compose if k.startswith("x-")}
    assert set(compose["services"]) == set(INFRA_IMAGES) | PROJECT_SERVICES


def test_official_images_are_pinned_by_tag() -> None:
    services = _services()
    for name, repository in INFRA_IMAGES.items():
        image, _, tag = services[name]["image"].partition(":")
        assert image == repository, name
        assert tag and tag != "latest" and re.match(r"\d+\.\d+\.\d+", tag), f"{name}: pin a full version"
    # The Spark master's version is the pyspark the jobs (and the workers) use.
    pyspark = next(d for d in _pyproject()["project"]["dependencies"] if d.startswith("pyspark=="))
    assert services["spark-master"]["image"].split(":")[1].startswith(pyspark.split("==")[1] + "-")
    for name in PROJECT_SERVICES:
        assert ":" in services[name]["image"] and not services[name]["image"].endswith(":latest"), name


def test_every_service_has_a_health_check() -> None:
    for name, service in _services().items():
        test = service.get("healthcheck", {}).get("test")
        assert isinstance(test, list) and test[0] == "CMD" and len(test) > 1, name


def test_kafka_is_a_single_kraft_node_reachable_as_kafka_9092() -> None:
    services = _services()
    env = services["kafka"]["environment"]
    assert env["KAFKA_PROCESS_ROLES"] == "broker,controller"
    assert env["KAFKA_AUTO_CREATE_TOPICS_ENABLE"] == "false"
    assert (
        env["KAFKA_CONTROLLER_QUORUM_VOTERS"]
        == f"{env['KAFKA_NODE_ID']}@kafka:{DEFAULTS.kafka_controller_port}"
    )
    assert f"PLAINTEXT://kafka:{DEFAULTS.kafka_port}" in env["KAFKA_ADVERTISED_LISTENERS"].split(",")
    assert f"PLAINTEXT://:{DEFAULTS.kafka_port}" in env["KAFKA_LISTENERS"].split(",")
    for key, value in env.items():
        if key.endswith("REPLICATION_FACTOR") or key.endswith("MIN_ISR"):
            assert value == "1", key
    assert "/opt/kafka/bin/kafka-broker-api-versions.sh" in services["kafka"]["healthcheck"]["test"]


def test_every_lambda_variable_is_a_settings_field() -> None:
    services = _services()
    for name in PROJECT_SERVICES:
        env = services[name]["environment"]
        assert isinstance(env, dict) and env, name
        assert all(key.startswith("LAMBDA_") for key in env), f"{name}: {sorted(env)}"
        assert all(isinstance(value, str) for value in env.values()), f"{name}: quote every value"
        unknown = {key for key in env if key.removeprefix("LAMBDA_").lower() not in FIELDS}
        assert not unknown, f"{name}: not fields of Settings: {sorted(unknown)}"
        # ...and the values parse as those fields do.
        Settings.model_validate({k.removeprefix("LAMBDA_").lower(): _value(v) for k, v in env.items()})
    reference = {key: services["topics"]["environment"][key] for key in COMMON_ENV}
    for name in PROJECT_SERVICES:
        assert {key: services[name]["environment"].get(key) for key in COMMON_ENV} == reference, name


def _value(text: str) -> Any:
    return json.loads(text) if text.startswith("{") else text


def test_ports_are_the_settings_defaults() -> None:
    services = _services()
    env = services["topics"]["environment"]
    assert int(env["LAMBDA_KAFKA_PORT"]) == DEFAULTS.kafka_port
    assert int(env["LAMBDA_REDIS_PORT"]) == DEFAULTS.redis_port
    assert urlparse(env["LAMBDA_MONGO_URI"]).port == DEFAULTS.mongo_port
    assert env["LAMBDA_SPARK_MASTER"] == f"spark://spark-master:{DEFAULTS.spark_cluster_port}"
    master = services["spark-master"]["command"]
    assert master[master.index("--port") + 1] == str(DEFAULTS.spark_cluster_port)
    assert master[master.index("--webui-port") + 1] == str(DEFAULTS.spark_cluster_webui_port)
    assert f"/{DEFAULTS.spark_cluster_webui_port}" in " ".join(
        services["spark-master"]["healthcheck"]["test"]
    )
    api = services["api"]
    assert api["ports"] == [f"{DEFAULTS.api_port}:{DEFAULTS.api_port}"]
    assert api["environment"]["LAMBDA_API_PORT"] == str(DEFAULTS.api_port)
    assert f":{DEFAULTS.api_port}/healthz" in " ".join(api["healthcheck"]["test"])
    # Nothing but the API is published.
    for name, service in services.items():
        assert name == "api" or "ports" not in service, name


ALL_INTERFACES = {"", "0.0.0.0", "*", "::"}
LOOPBACK = {"127.0.0.1", "localhost"}


def _listens_on(name: str, service: dict[str, Any]) -> tuple[str, int]:
    """Where the service's own command listens, read from its command line and environment (with
    the image's documented default where the command says nothing)."""
    command, env = service.get("command", []), service.get("environment", {})
    if name == "kafka":
        plaintext = next(part for part in env["KAFKA_LISTENERS"].split(",") if part.startswith("PLAINTEXT"))
        host, port = plaintext.removeprefix("PLAINTEXT://").rsplit(":", 1)
        return host, int(port)
    if name == "redis":  # redis-server binds every interface unless told --bind
        return (command[command.index("--bind") + 1] if "--bind" in command else "*"), 6379
    if name == "mongo":  # the official image starts mongod with --bind_ip_all
        return "0.0.0.0", DEFAULTS.mongo_port
    if name == "spark-master":  # the web UI binds every interface (SPARK_LOCAL_IP is not set)
        assert "SPARK_LOCAL_IP" not in env
        return "0.0.0.0", int(command[command.index("--webui-port") + 1])
    if name == "api":
        return env["LAMBDA_API_HOST"], int(env["LAMBDA_API_PORT"])
    raise AssertionError(f"{name}: unknown listener")


def _probes(test: list[str]) -> tuple[str, int]:
    """The address a health check connects to."""
    text = " ".join(test)
    if "redis-cli" in text:
        return "127.0.0.1", 6379
    if "mongosh" in text:
        return "localhost", DEFAULTS.mongo_port
    match = re.search(r"(?:/dev/tcp/|//|--bootstrap-server )([\w.-]+)[:/](\d+)", text)
    assert match, f"no address in {text}"
    return match.group(1), int(match.group(2))


def test_every_health_check_probes_where_its_command_listens() -> None:
    """A check on an address the service does not listen on never passes, and every service that
    waits for it never starts: each check is held against the bind address of the command itself."""
    services = _services()
    for name in ("kafka", "redis", "mongo", "spark-master", "api"):
        bind_host, bind_port = _listens_on(name, services[name])
        host, port = _probes(services[name]["healthcheck"]["test"])
        assert port == bind_port, f"{name}: checks port {port}, listens on {bind_port}"
        assert host == bind_host or (host in LOOPBACK and bind_host in ALL_INTERFACES), (
            f"{name}: checks {host}, listens on {bind_host or 'every interface'}"
        )
    # The worker listens on its container's own address (stack.services.container_worker_address);
    # its check is the project's probe of that same address, never a literal one.
    assert services["spark-worker"]["healthcheck"]["test"] == [
        "CMD",
        "python",
        "-m",
        "stack",
        "spark-worker-probe",
    ]


def test_commands_are_project_entry_points() -> None:
    services = _services()
    packages = _project_packages()
    for name in PROJECT_SERVICES:
        command = services[name]["command"]
        assert isinstance(command, list) and command[:2] == ["python", "-m"], name
        module, subcommand = command[2], command[3]
        assert module in PROJECT_MODULES and module in packages, f"{name}: unknown module {module}"
        main = ROOT / module / "__main__.py"
        assert main.is_file(), f"{module} has no __main__"
        text = main.read_text()
        # argparse subcommands or choices: the literal appears as a quoted string in __main__.
        assert re.search(rf"[\"']{re.escape(subcommand)}[\"']", text), f"{name}: {module} has no {subcommand}"
    assert services["topics"]["command"][2:] == ["ingest", "topics"]
    assert services["speed"]["command"][2:] == ["speed_layer", "run"]
    assert services["batch"]["command"][2:] == ["batch_layer", "run"]
    assert services["spark-worker"]["command"][2:] == ["stack", "spark-worker"]


def test_profiles_and_one_shots() -> None:
    services = _services()
    assert services["batch"]["profiles"] == ["batch"]
    assert services["generator"]["profiles"] == ["generator"]
    for name in set(services) - {"batch", "generator"}:
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
    for name in ("speed", "batch", "generator"):
        assert services[name]["depends_on"]["topics"]["condition"] == "service_completed_successfully"
    for name in ("speed", "batch"):
        assert services[name]["depends_on"]["spark-worker"]["condition"] == "service_healthy"


def test_every_piece_of_state_is_on_a_named_volume() -> None:
    compose = _compose()
    services = compose["services"]
    declared = set(compose["volumes"])
    used = set()
    for service in services.values():
        for source in _mounts(service).values():
            assert not source.startswith((".", "/")), f"bind mount in production compose: {source}"
            used.add(source)
    assert used == declared
    assert _on_volume(services["kafka"], services["kafka"]["environment"]["KAFKA_LOG_DIRS"])
    assert _on_volume(services["mongo"], "/data/db")
    assert _on_volume(services["redis"], "/data") and "--appendonly" in services["redis"]["command"]
    # The master dataset and the speed checkpoint: URIs on the volume every Spark process mounts at
    # the same path (the driver's and the executors' view of the storage must be the same).
    env = services["topics"]["environment"]
    for key in ("LAMBDA_MASTER_PATH", "LAMBDA_SPEED_CHECKPOINT_PATH"):
        uri = urlparse(env[key])
        assert uri.scheme == "file", key
        for name in ("speed", "batch", "spark-worker"):
            assert _on_volume(services[name], uri.path), f"{name}: {key} is not on a volume"
    volume = {_mounts(services[n])["/data"] for n in ("speed", "batch", "spark-worker")}
    assert len(volume) == 1, "driver and executors must share one volume"


def test_drivers_are_reachable_from_the_executors() -> None:
    services = _services()
    for name in ("speed", "batch"):
        conf = json.loads(services[name]["environment"]["LAMBDA_SPARK_CONF"])
        assert conf["spark.driver.host"] == services[name]["hostname"] == name
        assert conf["spark.driver.bindAddress"] == "0.0.0.0"


# --- Dockerfile ------------------------------------------------------------------------------------


def test_dockerfile_copies_the_packages_and_runs_unprivileged() -> None:
    text = DOCKERFILE.read_text()
    assert re.search(r"^COPY \. /app/$", text, flags=re.MULTILINE)
    ignored = set((ROOT / ".dockerignore").read_text().split())
    assert {".git", ".cache", "var"} <= ignored  # never bake local data or caches into the image
    assert re.search(r"^FROM python:3\.11\.\d+-slim", text, flags=re.MULTILINE), "pin the Python image"
    assert "mvn -B" in text and "toolchain/spark-kafka/pom.xml" in text
    assert re.search(r"^FROM maven:\d+\.\d+\.\d+-eclipse-temurin-17", text, flags=re.MULTILINE)
    assert "/opt/lambda/spark-jars" in text and "LAMBDA_CACHE_DIR=/opt/lambda" in text
    users = re.findall(r"^USER (\S+)$", text, flags=re.MULTILINE)
    assert users and users[-1] not in {"root", "0"}
    assert "SPARK_LOCAL_IP=" not in text
    assert "ENTRYPOINT" not in text


def test_the_api_requires_keys() -> None:
    """No open default in production: keys required (open mode would refuse 0.0.0.0 anyway)."""
    from api.auth import check_binding

    env = _services()["api"]["environment"]
    assert env["LAMBDA_API_AUTH"] == "keys"
    check_binding(Settings(api_auth=env["LAMBDA_API_AUTH"]), env["LAMBDA_API_HOST"])
