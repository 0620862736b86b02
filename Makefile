# Lambda platform: every entry point is a target here. `make help` lists them.
#
# Everything `make setup` installs lives in one cache directory (default .cache/, git-ignored;
# set LAMBDA_CACHE_DIR to share it between clones). The project runs from the checkout itself.

SHELL := /bin/bash
.DEFAULT_GOAL := help

export LAMBDA_CACHE_DIR ?= $(CURDIR)/.cache
VENV       := $(LAMBDA_CACHE_DIR)/venv
PY         := $(VENV)/bin/python
comma      := ,
export PYTHONPATH := $(CURDIR)
export SPARK_LOCAL_IP ?= 127.0.0.1
export PYTHONUNBUFFERED := 1

# test processes (pytest-xdist, whole files per process; 0 runs the suite in this process)
TEST_WORKERS ?= 2

# generator knobs: make generate RATE=20000 EVENTS=1000000 SEED=7
RATE   ?= 0
EVENTS ?= 100000
SEED   ?=
FILE   ?=

.PHONY: help setup demo up down ps topics generate replay batch recompute batch-loop generations diff-generations \
	speed speed-start speed-stop speed-status rebuild-realtime cluster-up cluster-down cluster-ps \
	api api-start api-stop api-key-add api-key-list api-key-revoke test test-unit lint bench bench-figures bench-store bench-render bench-views bench-visits bench-speed \
	bench-api bench-filters bench-collect bench-contract bench-soak soak clean-var

help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  \033[36m%-14s\033[0m %s\n", $$1, $$2}' $(MAKEFILE_LIST)

setup: ## install venv, Kafka + Spark connector jars, FerretDB, vegeta, redis-server (idempotent, cached)
	@bash toolchain/setup.sh

demo: setup up topics ## the main job: the whole platform up (stack, traffic, batch, speed layer, API) with example queries
	@$(PY) -m ingest generate --events 200000 --span-hours 48 $(if $(SEED),--seed $(SEED))
	@$(PY) -m batch_layer run
	@$(PY) -m speed_layer start
	@$(PY) -m ingest generate --events 20000 --rate 5000
	@$(PY) -m api start
	@$(PY) -m demo

up: ## start Kafka (KRaft), FerretDB and Redis on 127.0.0.1; data and logs under var/
	@$(PY) -m stack up

down: ## stop the API, the speed layer and the Spark cluster if running, then exactly the services `make up` started
	@$(PY) -m api stop >/dev/null; $(PY) -m speed_layer stop >/dev/null; $(PY) -m stack cluster-down >/dev/null; true
	@$(PY) -m stack down

ps: ## show the local services, their pids and probe results
	@$(PY) -m stack ps

cluster-up: ## a local Spark standalone cluster: a master and two 1-core workers (then LAMBDA_SPARK_MASTER=spark://127.0.0.1:7077)
	@$(PY) -m stack cluster-up

cluster-down: ## stop exactly the master and workers `make cluster-up` started
	@$(PY) -m stack cluster-down

cluster-ps: ## the local Spark cluster's processes and whether the master lists the workers ALIVE
	@$(PY) -m stack cluster-ps

topics: ## create the events and events.dlq topics if missing
	@$(PY) -m ingest topics

generate: ## produce synthetic traffic (RATE= EVENTS= SEED=)
	@$(PY) -m ingest generate --rate $(RATE) --events $(EVENTS) $(if $(SEED),--seed $(SEED))

replay: ## replay a JSONL or CSV file into the log (FILE=)
	@test -n "$(FILE)" || { echo "usage: make replay FILE=events.jsonl" >&2; exit 2; }
	@$(PY) -m ingest replay "$(FILE)"

batch: ## one incremental batch run (a new generation of batch views)
	@$(PY) -m batch_layer run

recompute: ## rebuild every batch view from the full master dataset (after fixing a view)
	@$(PY) -m batch_layer run --full

batch-loop: ## scheduled incremental batch runs every INTERVAL seconds (default 300)
	@$(PY) -m batch_layer loop --interval $(or $(INTERVAL),300)

speed: ## the streaming job in the foreground (live line: rows/s, batch duration, lag)
	@$(PY) -m speed_layer run

speed-start: ## the streaming job in the background (log: var/log/speed.log)
	@$(PY) -m speed_layer start

speed-stop: ## stop the background streaming job between two micro-batches
	@$(PY) -m speed_layer stop

speed-status: ## the streaming job and its last committed micro-batch
	@$(PY) -m speed_layer status

rebuild-realtime: ## after Redis lost data: rebuild the realtime views from the log, then restart the job
	@was_running=$$($(PY) -m speed_layer status | grep -c "running, pid"); \
	$(PY) -m speed_layer stop >/dev/null; \
	$(PY) -m speed_layer rebuild && if [ "$$was_running" = 1 ]; then $(PY) -m speed_layer start; fi

generations: ## list generations and the master dataset
	@$(PY) -m batch_layer status

diff-generations: ## which view values changed between generations A= and B=
	@test -n "$(A)" -a -n "$(B)" || { echo "usage: make diff-generations A=3 B=4" >&2; exit 2; }
	@$(PY) -m batch_layer diff $(A) $(B)

api: ## serve the REST API with uvicorn (LAMBDA_API_HOST, LAMBDA_API_PORT; WORKERS=1)
	@$(PY) -m api run --workers $(or $(WORKERS),1)

api-start: ## the API in the background (output: var/log/api.out)
	@$(PY) -m api start

api-stop: ## stop the background API
	@$(PY) -m api stop

api-key-add: ## create an API key: NAME= SCOPES=read,write,admin (some of them) SITES=a.example,b.example (optional)
	@test -n "$(NAME)" -a -n "$(SCOPES)" || { echo "usage: make api-key-add NAME=dashboard SCOPES=read [SITES=shop.example.com]" >&2; exit 2; }
	@$(PY) -m api keys add --name "$(NAME)" $(foreach s,$(subst $(comma), ,$(SCOPES)),--scope $(s)) $(foreach s,$(subst $(comma), ,$(SITES)),--site $(s))

api-key-list: ## the API keys: id, name, scopes, sites, created, revoked
	@$(PY) -m api keys list

api-key-revoke: ## revoke an API key: ID=
	@test -n "$(ID)" || { echo "usage: make api-key-revoke ID=3f9c2a1b" >&2; exit 2; }
	@$(PY) -m api keys revoke $(ID)

test: lint ## lint, then the whole test suite in TEST_WORKERS processes (each starts and stops its own stack on separate ports)
	@$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile

test-unit: ## run only the tests that need no services
	@$(PY) -m pytest -q -m "not integration"

lint: ## ruff, mypy and the packages' layering (lint-imports: pyproject.toml's [tool.importlinter])
	@$(VENV)/bin/ruff check . && $(VENV)/bin/ruff format --check . && $(PY) -m mypy . && $(VENV)/bin/lint-imports --no-logo --cache-dir $(LAMBDA_CACHE_DIR)/import-linter

bench: ## every benchmark but the soak (make bench-soak, ten minutes of faults), then the figures of README and docs/ from their results
	@$(PY) -m bench.ingest
	@$(PY) -m bench.views
	@$(PY) -m bench.visits
	@$(PY) -m bench.batch
	@$(PY) -m bench.speed
	@$(PY) -m bench.api
	@$(PY) -m bench.collect
	@$(PY) -m bench.contract --compare --layers
	@$(PY) -m bench.store
	@$(PY) -m bench.render
	@$(PY) -m bench.figures

bench-figures: ## write the figure tables of README and docs/ from bench/results/*.json (after a benchmark)
	@$(PY) -m bench.figures

bench-store: ## the batch view store alone: documents/s into the local MongoDB-protocol server, reads by _id
	@$(PY) -m bench.store

bench-render: ## the API's JSON rendering: orjson dicts against the pydantic response models
	@$(PY) -m bench.render

bench-views: ## the shared pass alone: stages and events/s with two views and with every dimension
	@$(PY) -m bench.views

bench-visits: ## what visits cost: the batch recompute and the speed layer's sustained rate, with and without visits
	@$(PY) -m bench.visits

bench-speed: ## the speed layer benchmark alone (sustained events/s against its floor, freshness p50/p95)
	@$(PY) -m bench.speed

soak: ## chaos on the local stack: 60 faults in 15 min (kill -9 of every part) with traffic, then every view against the recount
	@$(PY) -m stack up >/dev/null && $(PY) -m tests.chaos $(if $(SEED),--seed $(SEED))

bench-soak: ## the speed layer for 10 min under traffic, SIGKILLs, a Redis and a broker restart, batch runs; memory sampled, answers checked against a recount
	@$(PY) -m bench.soak

bench-contract: ## what the contract costs each layer: parse seconds per million records, and each layer's throughput with and without it
	@$(PY) -m bench.contract --compare --layers

bench-filters: ## POST /v2/query on the filter table of 10M events: p50/p95/p99 and CPU per query of a narrow combined filter and a filtered breakdown with visitors, one worker
	@$(PY) -m bench.filters

bench-collect: ## POST /api/event on one uvicorn worker: requests/s, p50/p99 and CPU/request of tracker page views at several rates (vegeta open loop)
	@$(PY) -m bench.collect

bench-api: ## API benchmark: req/s, p50/p99 and CPU/request of three queries vs /healthz on 10M events, one and two uvicorn workers, vegeta load
	@$(PY) -m bench.api

clean-var: down ## stop the stack and delete var/ (all local data!)
	@rm -rf var
