#!/usr/bin/env bash
# make setup: install everything the local platform needs into one cache directory.
#
# Idempotent: each step records a stamp (a hash of its inputs) and is skipped while the stamp
# matches, so a second run with everything cached takes seconds. Inputs are the checked-in files
# that pin versions: pyproject.toml, toolchain/*/pom.xml, toolchain/ferretdb/go.{mod,sum}, and
# VEGETA_VERSION below.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${LAMBDA_CACHE_DIR:-$ROOT/.cache}"
mkdir -p "$CACHE/stamps" "$CACHE/bin"
CACHE="$(cd "$CACHE" && pwd)"
PYTHON="${PYTHON:-python3.11}"
command -v "$PYTHON" >/dev/null 2>&1 || PYTHON=python3

STEP=0
TOTAL=10
T0=$(date +%s)

step() { STEP=$((STEP + 1)); STEP_T0=$(date +%s); printf '\033[1m[%d/%d] %s\033[0m\n' "$STEP" "$TOTAL" "$1"; }
done_step() { printf '      %s (%ds)\n' "$1" "$(($(date +%s) - STEP_T0))"; }
hash_of() { cat "$@" | sha256sum | cut -c1-16; }
fresh() { [[ -f "$CACHE/stamps/$1" && "$(cat "$CACHE/stamps/$1")" == "$2" ]]; }
stamp() { echo "$2" >"$CACHE/stamps/$1"; }

# --- 1. Python virtual environment -----------------------------------------------------------
step "Python environment ($CACHE/venv)"
PY_HASH=$(hash_of "$ROOT/pyproject.toml")
if fresh venv "$PY_HASH" && [[ -x "$CACHE/venv/bin/python" ]]; then
  done_step "cached"
else
  [[ -x "$CACHE/venv/bin/python" ]] || "$PYTHON" -m venv "$CACHE/venv"
  "$CACHE/venv/bin/python" - "$ROOT/pyproject.toml" >"$CACHE/requirements.txt" <<'EOF'
import sys, tomllib
project = tomllib.load(open(sys.argv[1], "rb"))["project"]
print("\n".join(project["dependencies"] + project["optional-dependencies"]["dev"]))
EOF
  # The project itself is not installed: it runs from the checkout (PYTHONPATH), so one cached
  # environment serves every clone and a code change never needs a reinstall.
  PIP_CACHE_DIR="$CACHE/pip" "$CACHE/venv/bin/pip" install --disable-pip-version-check \
    --progress-bar on -r "$CACHE/requirements.txt"
  stamp venv "$PY_HASH"
  done_step "installed"
fi

# --- 2. Kafka broker jars (KRaft) --------------------------------------------------------------
step "Apache Kafka broker jars (Maven Central)"
MVN=(mvn -B -q --no-transfer-progress "-Dmaven.repo.local=$CACHE/m2")
KAFKA_HASH=$(hash_of "$ROOT/toolchain/kafka-broker/pom.xml")
if fresh kafka "$KAFKA_HASH" && [[ -d "$CACHE/kafka/libs" ]]; then
  done_step "cached"
else
  rm -rf "$CACHE/kafka/libs"
  (cd "$ROOT/toolchain/kafka-broker" && "${MVN[@]}" dependency:copy-dependencies \
    -DincludeScope=runtime "-DoutputDirectory=$CACHE/kafka/libs")
  stamp kafka "$KAFKA_HASH"
  done_step "$(ls "$CACHE/kafka/libs" | wc -l) jars"
fi

# --- 3. Spark Kafka connector jars -------------------------------------------------------------
step "Spark Kafka connector jars (Maven Central)"
SPARK_HASH=$(hash_of "$ROOT/toolchain/spark-kafka/pom.xml")
if fresh spark-jars "$SPARK_HASH" && [[ -d "$CACHE/spark-jars" ]]; then
  done_step "cached"
else
  rm -rf "$CACHE/spark-jars"
  (cd "$ROOT/toolchain/spark-kafka" && "${MVN[@]}" dependency:copy-dependencies \
    -DexcludeTransitive=true "-DoutputDirectory=$CACHE/spark-jars")
  stamp spark-jars "$SPARK_HASH"
  done_step "$(ls "$CACHE/spark-jars" | tr '\n' ' ')"
fi

# --- 4. The layers' Java UDFs: the contract's recogniser, the speed layer's dedup ---------------
# The layers' fast path (contract/canonical.py): a DFA over each record's bytes; and the dedup in the
# scan (contract/duplicates.py, speed_layer/dedup.py). Compiled against pyspark's own Spark version; the jar and dk.brics.automaton go where the session takes jars from.
step "Contract recogniser and dedup (Java UDFs, Maven build)"
UDF_DIR="$ROOT/toolchain/contract-udf"
UDF_HASH=$(hash_of "$UDF_DIR/pom.xml" $(find "$UDF_DIR/src" -type f | sort))
if fresh contract-udf "$UDF_HASH" && [[ -d "$CACHE/contract-jars" ]]; then
  done_step "cached"
else
  rm -rf "$CACHE/contract-jars" "$CACHE/contract-udf-build"
  PYSPARK_JARS=$("$CACHE/venv/bin/python" -c 'import os, pyspark; print(os.path.join(os.path.dirname(pyspark.__file__), "jars"))')
  (cd "$UDF_DIR" && "${MVN[@]}" "-Dbuild.dir=$CACHE/contract-udf-build" "-Dpyspark.jars=$PYSPARK_JARS" package \
    dependency:copy-dependencies -DincludeScope=runtime "-DoutputDirectory=$CACHE/contract-jars")
  cp "$CACHE"/contract-udf-build/contract-udf-*.jar "$CACHE/contract-jars/"
  stamp contract-udf "$UDF_HASH"
  done_step "$(ls "$CACHE/contract-jars" | tr '\n' ' ')"
fi

# --- 4b. The batch layer's visits in the scan (Scala, against pyspark's own Spark) ------------
# Two Catalyst expressions (views/visit_scan.py): each task records its page views and emits their
# visits once it has read them all. Compiled by the Scala compiler pyspark ships (its jars
# directory has the compiler and every jar the expressions are compiled against): nothing is
# downloaded, and the classes match the Spark that runs them.
step "Visits in the scan (Scala expressions, pyspark's own compiler)"
SCAN_DIR="$ROOT/toolchain/visit-scan"
SCAN_HASH=$(hash_of $(find "$SCAN_DIR/src" -type f | sort) "$CACHE/venv/lib"/python3*/site-packages/pyspark/version.py)
if fresh visit-scan "$SCAN_HASH" && [[ -f "$CACHE/visit-jars/visit-scan.jar" ]]; then
  done_step "cached"
else
  rm -rf "$CACHE/visit-jars" "$CACHE/visit-scan-build"
  mkdir -p "$CACHE/visit-jars" "$CACHE/visit-scan-build"
  PYSPARK_JARS=$("$CACHE/venv/bin/python" -c 'import os, pyspark; print(os.path.join(os.path.dirname(pyspark.__file__), "jars"))')
  SCALA_CP=$(ls "$PYSPARK_JARS"/scala-compiler-*.jar "$PYSPARK_JARS"/scala-library-*.jar "$PYSPARK_JARS"/scala-reflect-*.jar | tr '\n' ':')
  java -cp "$SCALA_CP" scala.tools.nsc.Main -deprecation -feature -Werror \
    -classpath "$(ls "$PYSPARK_JARS"/*.jar | tr '\n' ':')" -d "$CACHE/visit-scan-build" \
    $(find "$SCAN_DIR/src" -name '*.scala' | sort)
  (cd "$CACHE/visit-scan-build" && "$CACHE/venv/bin/python" -m zipfile -c "$CACHE/visit-jars/visit-scan.jar" org)
  stamp visit-scan "$SCAN_HASH"
  done_step "$CACHE/visit-jars/visit-scan.jar"
fi

# --- 5. FerretDB (MongoDB wire protocol on SQLite) ---------------------------------------------
step "FerretDB 1.x with the SQLite backend (Go module build)"
FDB_HASH=$(hash_of "$ROOT/toolchain/ferretdb/go.mod" "$ROOT/toolchain/ferretdb/go.sum" "$ROOT/toolchain/ferretdb/main.go")
if fresh ferretdb "$FDB_HASH" && [[ -x "$CACHE/bin/ferretdb" ]]; then
  done_step "cached"
else
  command -v go >/dev/null || { echo "Go is required to build FerretDB" >&2; exit 1; }
  echo "      compiling (about a minute on 2 cores the first time)..."
  (cd "$ROOT/toolchain/ferretdb" &&
    GOMODCACHE="$CACHE/go/mod" GOCACHE="$CACHE/go/build" GOFLAGS=-modcacherw \
      go build -trimpath -o "$CACHE/bin/ferretdb" .)
  stamp ferretdb "$FDB_HASH"
  done_step "built $CACHE/bin/ferretdb"
fi

# --- 6. vegeta (the HTTP load tool of the API benchmark) -------------------------------------
# A Go module build at a pinned version; the version is also stamped into the binary, so
# `vegeta -version` (and bench/results/api.json) says which one measured.
VEGETA_VERSION=v12.13.0
step "vegeta $VEGETA_VERSION, HTTP load tool for the API benchmark (Go module build)"
if fresh vegeta "$VEGETA_VERSION" && [[ -x "$CACHE/bin/vegeta" ]]; then
  done_step "cached"
else
  command -v go >/dev/null || { echo "Go is required to build vegeta" >&2; exit 1; }
  (cd "$CACHE" &&
    GOBIN="$CACHE/bin" GOMODCACHE="$CACHE/go/mod" GOCACHE="$CACHE/go/build" GOFLAGS=-modcacherw \
      go install -trimpath -ldflags "-X main.Version=$VEGETA_VERSION" \
      "github.com/tsenart/vegeta/v12@$VEGETA_VERSION")
  stamp vegeta "$VEGETA_VERSION"
  done_step "built $CACHE/bin/vegeta"
fi

# --- 7. Redis ----------------------------------------------------------------------------------
step "Redis server (Debian package)"
if command -v redis-server >/dev/null 2>&1; then
  done_step "present: $(redis-server --version | cut -d' ' -f3)"
else
  SUDO=""
  [[ $(id -u) -eq 0 ]] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends redis-server >/dev/null
  # Debian starts its own instance; the platform runs its own under var/, so stop the system one.
  $SUDO systemctl disable --now redis-server >/dev/null 2>&1 || $SUDO service redis-server stop >/dev/null 2>&1 || true
  done_step "installed: $(redis-server --version | cut -d' ' -f3)"
fi

# --- 8. Chromium and its WebDriver (the dashboard's browser tests) -------------------------------
step "Chromium + chromium-driver (Debian packages, for the dashboard's browser tests)"
if command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; then
  done_step "present: $(chromium --version 2>/dev/null | cut -d' ' -f2)"
else
  SUDO=""
  [[ $(id -u) -eq 0 ]] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
    chromium chromium-driver >/dev/null
  done_step "installed: $(chromium --version 2>/dev/null | cut -d' ' -f2)"
fi

# --- 9. Class-data archive of the Spark driver JVM ----------------------------------------------
# Every job's JVM then maps the classes a driver loads instead of parsing them again: measured,
# a job's start (session and first shared pass) 33.5 s -> 26.6 s (views/jvm_archive.py).
step "Spark driver class-data archive (a faster start for every job)"
if ! java -version >/dev/null 2>&1; then
  echo "warning: java not found; Kafka and Spark need Java 17" >&2
  done_step "skipped: no java"
else
  ARCHIVE=$(cd "$ROOT" && LAMBDA_CACHE_DIR="$CACHE" "$CACHE/venv/bin/python" -c \
    'from config.jvm_archive import archive_path; from config.settings import get_settings; print(archive_path(get_settings()))')
  if [[ -f "$ARCHIVE" ]]; then
    done_step "cached"
  else
    mkdir -p "$(dirname "$ARCHIVE")"
    echo "      running a small Spark workload that dumps its classes (about 2 minutes on 2 cores)..."
    if (cd "$ROOT" && LAMBDA_CACHE_DIR="$CACHE" LAMBDA_VAR_DIR="$CACHE/spark-cds/var" \
        "$CACHE/venv/bin/python" -m views.jvm_archive) >"$CACHE/spark-cds/build.log" 2>&1; then
      done_step "$(tail -1 "$CACHE/spark-cds/build.log")"
    else
      # Not fatal: without the archive every job starts as it did before, only slower.
      tail -20 "$CACHE/spark-cds/build.log" >&2
      done_step "failed (jobs start without it; log: $CACHE/spark-cds/build.log)"
    fi
  fi
fi

printf '\033[1msetup complete\033[0m in %ds (cache: %s)\n' "$(($(date +%s) - T0))" "$CACHE"
