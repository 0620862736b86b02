# syntax=docker/dockerfile:1
#
# One image for the project's own services (ingest, api, speed_layer, batch_layer). Compose gives
# each service its command; configuration comes only from LAMBDA_* environment variables.
#
#   docker build -t lambda-platform .        (or: docker compose build)

# --- stage 1: the Spark Kafka connector jars, resolved from the same pom `make setup` uses ---------
FROM maven:3.9.11-eclipse-temurin-17 AS spark-jars
WORKDIR /build
COPY toolchain/spark-kafka/pom.xml pom.xml
RUN mvn -B --no-transfer-progress dependency:copy-dependencies \
        -DexcludeTransitive=true -DoutputDirectory=/jars \
    && ls -l /jars

# --- stage 2: the contract's recogniser of canonical records, a Spark UDF in Java (same pom as setup)
FROM maven:3.9.11-eclipse-temurin-17 AS contract-udf
WORKDIR /build
COPY toolchain/contract-udf/ .
RUN mvn -B --no-transfer-progress -Dbuild.dir=/build/out package \
        dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory=/jars \
    && cp /build/out/contract-udf-*.jar /jars/ \
    && ls -l /jars

# --- stage 3: the runtime ----------------------------------------------------------------------------
# bookworm, not the floating 3.11-slim tag: Debian 13 (trixie) no longer ships openjdk-17.
FROM python:3.11.14-slim-bookworm

ENV PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_ROOT_USER_ACTION=ignore \
    PIP_CACHE_DIR=/var/cache/pip

# Java 17 for Spark (pyspark starts a JVM). The man directory works around openjdk's postinst on slim.
RUN mkdir -p /usr/share/man/man1 \
    && apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends openjdk-17-jre-headless \
    && rm -rf /var/lib/apt/lists/* \
    && java -version

# Python dependencies: exactly the [project] dependencies of pyproject.toml (no dev extras), read with
# tomllib as toolchain/setup.sh does. The project itself is not installed: it runs from /app.
# pyspark is a large source package built on install; the cache mount keeps pip's cache across builds.
COPY pyproject.toml /tmp/pyproject.toml
RUN --mount=type=cache,target=/var/cache/pip \
    python -c "import tomllib; print('\n'.join(tomllib.load(open('/tmp/pyproject.toml', 'rb'))['project']['dependencies']))" \
        > /tmp/requirements.txt \
    && pip install -r /tmp/requirements.txt \
    && rm /tmp/requirements.txt /tmp/pyproject.toml

# The non-root service user. /data is the var dir (LAMBDA_VAR_DIR, a volume in compose); a named
# volume mounted there inherits this ownership on first use.
RUN useradd --system --create-home --home-dir /home/lambda --shell /usr/sbin/nologin --uid 10001 lambda \
    && mkdir -p /app /data /opt/lambda \
    && chown lambda:lambda /app /data

# settings.cache_dir / "visit-jars": the batch layer's visits in the scan, compiled as
# toolchain/setup.sh does, by the Scala compiler pyspark ships, against pyspark's own jars.
COPY toolchain/visit-scan/ /tmp/visit-scan/
RUN J=$(python -c 'import os, pyspark; print(os.path.join(os.path.dirname(pyspark.__file__), "jars"))') \
    && mkdir -p /tmp/visit-scan/out /opt/lambda/visit-jars \
    && java -cp "$(ls "$J"/scala-compiler-*.jar "$J"/scala-library-*.jar "$J"/scala-reflect-*.jar | tr '\n' ':')" \
        scala.tools.nsc.Main -classpath "$(ls "$J"/*.jar | tr '\n' ':')" -d /tmp/visit-scan/out \
        $(find /tmp/visit-scan/src -name '*.scala' | sort) \
    && cd /tmp/visit-scan/out && python -m zipfile -c /opt/lambda/visit-jars/visit-scan.jar org \
    && rm -rf /tmp/visit-scan

# settings.cache_dir / "spark-jars" is where the Spark session finds the connector jars.
COPY --from=spark-jars /jars /opt/lambda/spark-jars
# settings.cache_dir / "contract-jars": the recogniser's jar and dk.brics.automaton.
COPY --from=contract-udf /jars /opt/lambda/contract-jars

# The source: the whole checkout minus what .dockerignore leaves out (.git, .cache, var, results).
# Files stay root-owned (read-only for the service); /app itself is writable so Spark may create
# its default spark-warehouse/ in the working directory.
COPY . /app/

# SPARK_LOCAL_IP is deliberately not set: in a container Spark must bind the container's address so
# that executors of a cluster (LAMBDA_SPARK_MASTER) can reach the driver.
ENV PYTHONPATH=/app \
    LAMBDA_CACHE_DIR=/opt/lambda \
    LAMBDA_VAR_DIR=/data

WORKDIR /app
USER lambda

EXPOSE 8000
