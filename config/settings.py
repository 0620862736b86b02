"""The one settings object of the platform.

Every component reads its configuration from here, and every field can be set by an environment
variable with the ``LAMBDA_`` prefix (``LAMBDA_KAFKA_PORT=29092``). The defaults run the local stack
on 127.0.0.1 with no configuration at all; production overrides the addresses and the Spark master.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

PROJECT_ROOT = Path(__file__).resolve().parent.parent


ENV_PREFIX = "LAMBDA_"
ENV_NONE = "null"
"""How the environment says "no value" for an optional field (``LAMBDA_MONGO_URI=null``)."""


DEFAULT_PAGE_DROP_PARAMS = (
    *("fbclid", "gclid", "gclsrc", "dclid", "gbraid", "wbraid", "msclkid", "yclid", "twclid"),
    *("ttclid", "li_fat_id", "igshid", "mc_cid", "mc_eid", "_hsenc", "_hsmi", "mkt_tok"),
)
"""Click and mailing identifiers: unique per click, so a page with them would be a key per visit."""
_PARAM_NAME = re.compile(r"^[a-z0-9_.-]+$")


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, env_file=None, extra="ignore", env_parse_none_str=ENV_NONE
    )

    # --- where things live -------------------------------------------------------------------
    var_dir: Path = Field(
        PROJECT_ROOT / "var", description="All local data and logs live below this directory."
    )
    cache_dir: Path = Field(
        PROJECT_ROOT / ".cache",
        description="What `make setup` installs: venv, Kafka and connector jars, the FerretDB binary.",
    )

    # --- Kafka --------------------------------------------------------------------------------
    kafka_host: str = "127.0.0.1"
    kafka_port: int = 9092
    kafka_controller_port: int = 9093
    kafka_heap: str = Field("1g", description="Broker JVM heap (-Xmx) for the local stack.")
    events_topic: str = "events"
    dlq_topic: str = "events.dlq"
    topic_partitions: int = Field(4, ge=1)
    topic_retention_ms: int = Field(
        30 * 24 * 3600 * 1000,
        description="Retention of `events` (-1: forever). The master dataset is the long-term copy.",
    )
    dlq_retention_ms: int = 30 * 24 * 3600 * 1000

    # --- MongoDB protocol (FerretDB locally, MongoDB in production) ---------------------------
    mongo_host: str = "127.0.0.1"
    mongo_port: int = 27017
    mongo_uri: str | None = Field(
        None, description="A full MongoDB URI; when set, host and port are ignored."
    )
    mongo_db: str = "lambda"

    # --- Redis ----------------------------------------------------------------------------------
    redis_host: str = "127.0.0.1"
    redis_port: int = 6379
    redis_db: int = 0
    redis_uri: str | None = Field(
        None,
        description="A full Redis URL (a password: redis://:secret@host:6379/0; TLS: rediss://...); "
        "when set, host, port and db are ignored.",
    )

    # --- the event contract ---------------------------------------------------------------------
    max_future_seconds: int = Field(
        300, ge=0, description="Events stamped further than this in the future are rejected (clock skew)."
    )
    max_past_days: int = Field(
        30, ge=0, description="Events older than this are rejected; raise it to replay historic files."
    )

    # --- Spark ----------------------------------------------------------------------------------
    spark_master: str = Field(
        "local[2]", description="Any Spark master URL: local[*], spark://, yarn, k8s://."
    )
    spark_driver_memory: str = Field(
        "3g",
        description=(
            "Set before the JVM starts; local mode runs in it. 3g keeps the batch benchmark's full "
            "recompute under its 4 GB memory target (docs/scaling.md)."
        ),
    )
    spark_shuffle_partitions: int = Field(4, ge=1, description="Sized for 2 cores; raise on a cluster.")
    batch_views_per_task: int = Field(
        1_000_000,
        ge=1000,
        description=(
            "Most events a task of the batch layer's shared pass reads: its shuffle by visitor has "
            "at least events read / this many partitions (and spark_shuffle_partitions), since each "
            "task holds its page views in memory to count their visits (docs/scaling.md)."
        ),
    )
    batch_record_limit_mib: int = Field(
        400,
        ge=1,
        description=(
            "Most heap, MiB, one task's record of its page views may take (visits in the scan; its "
            "size per view is in docs/scaling.md); past it the task fails, naming this setting, "
            "instead of the JVM running out of heap."
        ),
    )
    spark_java_options: str = Field(
        "",
        description="JVM flags of every Spark JVM (the driver, which local mode runs in, and executors).",
    )
    speed_java_options: str = Field(
        "-XX:+UseParallelGC",
        description=(
            "JVM flags of the speed layer's Spark JVMs, after spark_java_options. The throughput "
            "collector: the speed layer keeps a large live set (the materialised micro-batch, the "
            "dedup state), and on 2 cores G1's concurrent marking ran most of the time beside it "
            "(docs/scaling.md, 'The JVM's collector'). Empty: Java's default. The JVM refuses two "
            "collectors, so name one here or in spark_java_options, not in both."
        ),
    )
    batch_java_options: str = Field(
        "-XX:+UseParallelGC",
        description=(
            "JVM flags of the batch layer's Spark JVMs, after spark_java_options: the throughput "
            "collector, as for the speed layer (docs/scaling.md, 'The JVM's collector', has the "
            "batch recompute measured with both). Empty: Java's default."
        ),
    )
    spark_class_archive: bool = Field(
        True,
        description="Start the driver JVM from the class-data archive `make setup` builds, if there is one.",
    )
    spark_conf: dict[str, str] = Field(
        default_factory=dict,
        description='Extra Spark settings, JSON: LAMBDA_SPARK_CONF=\'{"spark.x": "y"}\'.',
    )

    spark_executor_memory: str = Field(
        "768m", description="Heap of each executor on a cluster (spark.executor.memory); not used locally."
    )
    spark_executor_cores: int = Field(1, ge=1, description="Cores of each executor on a cluster.")
    spark_python: str | None = Field(
        None,
        description="Python of the executors on a cluster (spark.pyspark.python); default: the driver's.",
    )

    # --- the local Spark standalone cluster (make cluster-up) -----------------------------------
    spark_cluster_host: str = Field("127.0.0.1", description="Address the master and workers bind.")
    spark_cluster_port: int = Field(7077, ge=1, le=65535, description="The master's port.")
    spark_cluster_webui_port: int = Field(
        8080, ge=1, le=65535, description="The master's web UI (loopback); worker i uses this + 1 + i."
    )
    spark_cluster_workers: int = Field(2, ge=1, le=16, description="Workers `make cluster-up` starts.")
    spark_worker_cores: int = Field(1, ge=1, description="Cores each local worker offers.")
    spark_worker_memory: str = Field("1g", description="Memory each local worker offers its executors.")

    # --- the batch layer ------------------------------------------------------------------------
    master_path: str | None = Field(
        None,
        description="Master dataset root: a local path or any Hadoop-compatible URI (default var/master).",
    )
    hll_lg_k: int = Field(12, ge=4, le=21, description="lgConfigK of the HLL sketches (12: ~1.6% std error).")
    filter_table: bool = Field(
        True,
        description="Make the filter table (views.filter_table) in both layers, the rows combined "
        "filters (POST /v2/query) scan; off leaves the views alone (benchmarks measure its cost).",
    )
    filter_table_path: str | None = Field(
        None,
        description="Root of the batch filter table's Parquet files: a local path or a file: URI "
        "(default var/filters); the API reads them from the same filesystem.",
    )
    retire_grace_s: float = Field(
        300.0,
        ge=0,
        description="How long a retired generation's data stays for queries in flight and diffing.",
    )

    # --- the speed layer ------------------------------------------------------------------------
    speed_trigger_s: float = Field(1.0, gt=0, description="Micro-batch trigger interval.")
    speed_max_offsets_per_trigger: int | None = Field(
        2_000_000, ge=1, description="Backpressure: at most this many records per micro-batch (None: all)."
    )
    speed_single_partition_rows: int = Field(
        50_000,
        ge=0,
        description="Micro-batches of up to this many rows compute their views in one task, with no "
        "shuffle (a shuffle costs a fixed part of a second; past ~50K rows two cores win).",
    )
    count_visits: bool = Field(
        True,
        description=(
            "Count visits (visits, bounces, duration, entry and exit pages) in both layers; off "
            "leaves page views and visitors only (benchmarks measure the cost of visits with it)."
        ),
    )
    session_gap_s: int = Field(
        1800,
        ge=1,
        le=86400,
        description=(
            "A visit ends after this much event time without a page view (Plausible and Google "
            "Analytics use 30 min)."
        ),
    )
    page_drop_params: list[str] = Field(
        default_factory=lambda: list(DEFAULT_PAGE_DROP_PARAMS),
        description="Query parameters the page key leaves out beside every utm_* one (ad click ids, "
        "mailing ids), as JSON: LAMBDA_PAGE_DROP_PARAMS='[\"fbclid\"]'. Names are matched in "
        "ASCII lower case; the stored event keeps its URL as sent (views.campaigns).",
    )
    visit_lateness_s: int = Field(
        43200,
        ge=0,
        description=(
            "The speed layer keeps each open visit until this much log-append time after its last view "
            "(plus the session gap): a page view arriving later than this behind the newest record may "
            "belong to a visit it no longer holds, and its buckets are flagged not exact until the next "
            "batch run."
        ),
    )
    current_visitors_minutes: int = Field(
        5,
        ge=1,
        le=60,
        description="GET /v1/current-visitors' default window: the current UTC minute of event time and "
        "this many before it (docs/current-visitors.md).",
    )
    current_visitors_max_minutes: int = Field(
        30,
        ge=1,
        le=60,
        description="The longest window of GET /v1/current-visitors; the speed layer's per-minute "
        "sketches expire this many minutes (plus two) after their minute.",
    )
    current_visitors_exact_limit: int = Field(
        100,
        ge=0,
        le=10_000,
        description="A minute's visitors of a site or page are kept as a set (exact answers) up to this "
        "many; past it only its HLL sketch (estimates with bounds).",
    )
    current_visitors_lag_s: float = Field(
        30.0,
        gt=0,
        description="GET /v1/current-visitors says its window is covered only when the speed layer has "
        "counted every record appended to the log more than this long ago; otherwise no number.",
    )
    speed_dedup_window_s: int = Field(
        600,
        ge=1,
        description="Duplicates (same event_id) are dropped when re-sent within this much log-append time.",
    )
    speed_checkpoint_path: str | None = Field(
        None, description="Streaming checkpoint: a local path or Hadoop-compatible URI (default var/speed)."
    )

    batch_lease_s: float = Field(
        120.0,
        gt=0,
        description="The batch run's lease: renewed every third of it while the run works; a run that "
        "stops renewing (killed, paused) is taken over once it expires.",
    )
    batch_stalled_after_s: float = Field(
        3 * 3600.0,
        gt=0,
        description="/v1/status says the batch layer is stalled when the served cut is older than this.",
    )
    batch_pause_at: str | None = Field(
        None, description="Crash tests only: the batch run stops at this checkpoint until killed."
    )

    # --- the serving layer and its REST API ----------------------------------------------------
    api_host: str = "127.0.0.1"
    api_port: int = Field(8000, ge=1, le=65535)
    api_key: SecretStr | None = Field(
        None,
        description="Legacy ingest key: accepted as a key with the `write` scope (X-API-Key or "
        "Authorization: Bearer); when set in open mode, POST /v1/events requires it.",
    )
    api_auth: Literal["open", "keys"] = Field(
        "open",
        description="`keys`: every /v1 route and /metrics need an API key with the route's scope "
        "(`python -m api keys add`). `open`: a request without a key may do everything; allowed "
        "only when the API binds a loopback address (it refuses to start otherwise).",
    )
    api_key_cache_s: float = Field(
        5.0, ge=0, description="How long a worker trusts a key it looked up (a revocation takes this long)."
    )
    api_max_cost: int = Field(
        20_000,
        ge=1,
        description="Most stored values (buckets x keys) one query may read; above it a 422 names the "
        "limit and the cost asked.",
    )
    api_max_concurrency: int = Field(
        64, ge=1, description="Requests one worker serves at once; past it a 503 with Retry-After."
    )
    api_rate_limit: str = Field(
        "50/second",
        description="Requests per API key and worker (the `limits` notation: `50/second`, "
        "`1000/minute`); past it a 429 with Retry-After. Requests without a key (open mode) are not limited.",
    )
    api_tiling_cache_bytes: int = Field(
        16 << 20, ge=0, description="Bytes of the range tilings cached per process (serving_layer.tiling)."
    )
    api_read_plan_cache_bytes: int = Field(
        16 << 20, ge=0, description="Bytes of the series read plans cached per process (serving_layer.merge)."
    )
    api_answer_cache_bytes: int = Field(
        32 << 20,
        ge=0,
        description="Bytes of rendered series answers cached per worker, each reused only while the "
        "realtime state it was computed from is current (api.answer_cache); 0: off.",
    )
    api_params_cache_bytes: int = Field(
        4 << 20, ge=0, description="Bytes of validated query strings cached per process (api.params)."
    )
    url_cache_bytes: int = Field(
        8 << 20, ge=0, description="Bytes of normalised URLs cached per process (contract.normalize_url)."
    )
    api_cors_origins: list[str] = Field(
        default_factory=list,
        description="Origins whose web pages may call the API (CORS), as JSON: "
        "LAMBDA_API_CORS_ORIGINS='[\"https://a.example\"]'. None by default: only the API's own pages.",
    )
    api_max_range_days: int = Field(92, ge=1, description="Longest range a query may ask for.")
    api_max_top: int = Field(1000, ge=1, description="Largest `limit` of GET /v1/top-urls.")
    api_max_body_bytes: int = Field(1_048_576, ge=1024, description="Largest POST body (413 above).")
    api_max_events: int = Field(1000, ge=1, description="Most events in one POST (413 above).")
    api_default_wait_ms: int = Field(
        2000, ge=0, description="How long a query with an offsets token waits for the events to show."
    )
    api_max_wait_ms: int = Field(30_000, ge=0, description="Largest `wait_ms` a query may ask for.")
    api_cache_mb: int = Field(
        256,
        ge=0,
        description="In-process cache of batch documents (immutable per generation), MiB; their day "
        "rankings are cached apart, in a quarter of this.",
    )
    api_mongo_timeout_ms: int = Field(2000, ge=1, description="MongoDB server selection / connect timeout.")
    api_mongo_read_timeout_s: float = Field(
        60.0, gt=0, description="Longest wait for one batch document (see stores.mongo.reader)."
    )
    api_mongo_concurrency: int = Field(4, ge=1, description="Batch documents read from MongoDB at once.")
    api_redis_timeout_ms: int = Field(500, ge=1, description="Redis connect and read timeout.")
    api_kafka_timeout_s: float = Field(5.0, gt=0, description="Kafka timeouts of /v1/status, /readyz.")
    api_produce_timeout_s: float = Field(10.0, gt=0, description="Longest wait for Kafka to ack a POST.")
    api_retry_after_s: int = Field(5, ge=1, description="Retry-After of 503 answers.")
    api_filter_max_rows: int = Field(
        50_000_000,
        ge=1,
        description="Most rows of the filter table one POST /v2/query may scan (its estimate from the "
        "Parquet footers and the realtime rows' counts, before the realtime rows are fetched); above it "
        "a 422 names the limit.",
    )
    api_filter_max_realtime_mb: int = Field(
        256,
        ge=1,
        description="Most memory the realtime rows of one POST /v2/query may take to read, MiB: the "
        "streams fetched from Redis plus their rows decoded, as the speed layer counted them; above it "
        "a 422 names the limit and nothing is fetched.",
    )
    api_filter_concurrency: int = Field(
        2, ge=1, description="Filter-table scans one worker runs at once (POST /v2/query)."
    )
    api_filter_queue: int = Field(
        8,
        ge=0,
        description="Filter-table scans that may wait for a turn beyond LAMBDA_API_FILTER_CONCURRENCY; "
        "past it a 429 with Retry-After.",
    )
    api_filter_timeout_s: float = Field(
        10.0,
        gt=0,
        description="Longest wait plus scan of one POST /v2/query; past it the scan is interrupted (504).",
    )
    api_filter_threads: int = Field(1, ge=1, description="DuckDB threads of one filter-table scan.")
    api_filter_memory_mb: int = Field(
        512, ge=16, description="DuckDB memory limit of one filter-table scan, MiB."
    )

    # --- collection from web pages: POST /api/event (the Plausible tracker's payload) ----------
    collect_sites: list[str] = Field(
        default_factory=list,
        description="Sites whose pages may send page views to POST /api/event: the tracker's `domain`, "
        "as JSON: LAMBDA_COLLECT_SITES='[\"shop.example.com\"]'. None by default: every event is refused.",
    )
    collect_origins: list[str] = Field(
        default_factory=list,
        description="Origins of the pages that post to /api/event (CORS; a browser's request from any "
        "other origin is refused). Empty: https:// and http:// of each collected site and of its www. twin.",
    )
    collect_trusted_proxies: list[str] = Field(
        default_factory=list,
        description="Addresses or networks (CIDR) of the reverse proxies in front of the API: only a "
        "request from one of them has its client address read from X-Forwarded-For.",
    )
    collect_drop_bots: bool = Field(
        False,
        description="Drop (answer, but do not produce) page views whose user agent the device rules "
        "call a bot (views.devices); each drop is counted in /metrics.",
    )
    collect_max_in_flight: int = Field(
        1024,
        ge=1,
        description="POST /api/event requests one worker holds at once (each waits for Kafka's "
        "acknowledgement, at most one body each); past it a 503 with Retry-After. Apart from "
        "LAMBDA_API_MAX_CONCURRENCY, which the other routes share.",
    )
    collect_max_body_bytes: int = Field(8192, ge=256, description="Largest POST /api/event body (413 above).")

    # --- the probes and timeouts of the local stack ---------------------------------------------
    stack_start_timeout_s: float = 60.0
    service_wait_s: float = Field(
        300.0,
        gt=0,
        description="How long a job that starts waits for Kafka, MongoDB and Redis before it gives up.",
    )

    # --- the keeper of background jobs (make speed-start, make api-start) --------------------
    job_restart_max: int = Field(
        5, ge=0, description="A job that exits more often than this within the window is not restarted."
    )
    job_restart_window_s: float = Field(600.0, gt=0, description="The window of job_restart_max.")
    job_restart_backoff_initial_s: float = Field(
        1.0, ge=0, description="Wait before the first restart; doubled for each exit within the window."
    )
    job_restart_backoff_max_s: float = Field(60.0, ge=0, description="Longest wait before a restart.")
    log_max_bytes: int = Field(
        50 * 1024 * 1024, ge=1024, description="A job's log file is rotated past this size."
    )
    log_backups: int = Field(3, ge=1, description="Rotated log files kept per job (name.out.1, ...).")

    @field_validator("page_drop_params")
    @classmethod
    def _param_names(cls, names: list[str]) -> list[str]:
        """Lower-case names of letters, digits, ``_``, ``.`` and ``-``: each becomes a literal in
        the page key's Spark expression."""
        lowered = [n.lower() for n in names]
        bad = [n for n in lowered if not _PARAM_NAME.match(n)]
        if bad:
            raise ValueError(f"not a query parameter name: {bad[0]!r} (letters, digits, _ . -)")
        return sorted(set(lowered))

    def to_env(self, *fields: str) -> dict[str, str]:
        """The ``LAMBDA_*`` variables that make another process (a job, a CLI under test, a
        benchmark's subprocess) read exactly these settings: every field, or the named ones.

        Values are written the way the settings read them back: paths as text, secrets revealed,
        booleans and containers as JSON, None as ``null``.
        """
        unknown = set(fields) - set(type(self).model_fields)
        if unknown:
            raise ValueError(f"not settings: {', '.join(sorted(unknown))}")
        return {
            f"{ENV_PREFIX}{name.upper()}": _env_value(getattr(self, name))
            for name in fields or type(self).model_fields
        }

    @property
    def kafka_bootstrap(self) -> str:
        return f"{self.kafka_host}:{self.kafka_port}"

    @property
    def mongo_url(self) -> str:
        return self.mongo_uri or f"mongodb://{self.mongo_host}:{self.mongo_port}/"

    @property
    def redis_url(self) -> str:
        return self.redis_uri or f"redis://{self.redis_host}:{self.redis_port}/{self.redis_db}"

    @property
    def master_uri(self) -> str:
        return self.master_path or (self.var_dir / "master").resolve().as_uri()

    @property
    def filter_table_uri(self) -> str:
        return self.filter_table_path or (self.var_dir / "filters").resolve().as_uri()

    @property
    def speed_checkpoint_uri(self) -> str:
        return self.speed_checkpoint_path or (self.var_dir / "speed" / "checkpoint").resolve().as_uri()

    @property
    def spark_jars_dir(self) -> Path:
        return self.cache_dir / "spark-jars"

    @property
    def contract_jars_dir(self) -> Path:
        """The contract's recogniser of canonical records (a Java UDF, toolchain/contract-udf)."""
        return self.cache_dir / "contract-jars"

    @property
    def visit_jars_dir(self) -> Path:
        """The batch layer's visits in the scan (Scala expressions, toolchain/visit-scan)."""
        return self.cache_dir / "visit-jars"

    @property
    def spark_cluster_url(self) -> str:
        """The master URL of the local standalone cluster (set LAMBDA_SPARK_MASTER to it to use it)."""
        return f"spark://{self.spark_cluster_host}:{self.spark_cluster_port}"

    @property
    def log_dir(self) -> Path:
        return self.var_dir / "log"

    @property
    def run_dir(self) -> Path:
        return self.var_dir / "run"


def _env_value(value: object) -> str:
    if value is None:
        return ENV_NONE
    if isinstance(value, SecretStr):
        return value.get_secret_value()
    if isinstance(value, bool | dict | list):
        return json.dumps(value)
    return str(value)


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings, read once from the environment."""
    return Settings()
