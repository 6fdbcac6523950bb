# The two commands of README.md: `make demo` and `make test`.
# Each creates/updates its virtualenv and starts an embedded PostgreSQL when
# DATABASE_URL is unset (devtools/withdb.py), so a fresh machine needs only
# Python 3.12+ and make.

SHELL := /bin/bash
.DEFAULT_GOAL := help

# First interpreter that is Python >= 3.12; 3.12 first because pgserver ships
# wheels for it. Override with `make test PYTHON=/path/to/python3.x`.
PYTHON ?= $(shell for p in python3.12 python3.13 python3.14 python3 python; do \
	command -v $$p >/dev/null 2>&1 && $$p -c 'import sys; sys.exit(sys.version_info < (3, 12))' 2>/dev/null \
	&& { echo $$p; break; }; done)
# Django series for this venv: the newest by default; `make test DJANGO=5.2` uses its own venv.
DJANGO ?= 6.1
NEWEST_DJANGO := 6.1
VENV ?= $(if $(filter $(NEWEST_DJANGO),$(DJANGO)),.venv,.venv-django$(DJANGO))
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(DJANGO)
WITHDB := $(BIN)/python -m devtools.withdb

.PHONY: help venv demo runserver createsuperuser test pytest lint format docs migrations-check matrix versions mutation bench bench-large bench-memory bench-django-q2 browser pgbouncer clean wheel-check

help:
	@echo "make demo       run the example project's demo (embedded PostgreSQL unless DATABASE_URL is set)"
	@echo "make test       lint, type-check, docs build, migrations check and the whole test suite"
	@echo "make lint       ruff check, ruff format --check, mypy"
	@echo "make docs       build the docs with warnings as errors"
	@echo "make wheel-check  build the sdist and wheel, install the wheel in a fresh venv, run the demo from it"
	@echo "make matrix     the test suite on Django 5.2, 6.0 and 6.1 (nox)"
	@echo "make versions   the adapter's tests on the oldest django-q2, the task backend's on Django 6.0, the canaries,"
	@echo "                and Django's and django-tasks-db's own task tests on our backend"
	@echo "make mutation   mutation testing of the policy module (slow; not part of make test)"
	@echo "make bench      side by side with the peers, worker and dead-letter admin benchmarks (docs/performance.md)"
	@echo "make bench-large  drain and claim with 10^6 succeeded jobs + 10^5 dead letters, then pruning them (~5 min)"
	@echo "make bench-memory  a worker's RSS over 10^6 no-op jobs (BENCH_MEMORY_ARGS=\"--jobs 300000\"; ~10 min)"
	@echo "make bench-django-q2  django-q2 with and without the adapter (docs/performance.md; ~3 min)"
	@echo "make browser    install Debian's chromium for tests/browser (apt-get; needs root or sudo)"
	@echo "make pgbouncer  install Debian's pgbouncer for tests/integration/worker/test_pgbouncer.py (apt-get)"
	@echo "make chaos-ci / chaos / chaos-partition / chaos-netns / chaos-flows  the chaos harness (docs/reliability.md)"

$(STAMP): pyproject.toml
	@test -n "$(PYTHON)" || { echo "No Python >= 3.12 found; install one or pass PYTHON=..." >&2; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]' 'django~=$(DJANGO).0'
	rm -f $(VENV)/.installed-*
	touch $@

venv: $(STAMP)

demo: $(STAMP)
	$(WITHDB) --data .pgdata/demo -- $(BIN)/python manage.py demo

runserver: $(STAMP)
	$(WITHDB) --data .pgdata/demo -- $(BIN)/python manage.py runserver

createsuperuser: $(STAMP)
	$(WITHDB) --data .pgdata/demo -- $(BIN)/python manage.py createsuperuser

# Line coverage of django_jobretry/ ([tool.coverage.*] in pyproject.toml, worker subprocesses
# included) must not drop below this many percent in `make test`; `make pytest` alone does not check it.
COVERAGE_FLOOR ?= 97

test: $(STAMP)
	$(MAKE) --no-print-directory lint docs
	$(WITHDB) --throwaway -- $(MAKE) --no-print-directory migrations-check pytest \
		PYTEST_COV_ARGS="--cov --cov-report=term-missing:skip-covered --cov-fail-under=$(COVERAGE_FLOOR)"

# Test processes for `make pytest` (pytest-xdist, a test database each): one more than the
# cores, since most tests wait on subprocesses and the database; PYTEST_WORKERS=0 runs in one process.
PYTEST_WORKERS ?= $(shell echo $$(( $$(nproc 2>/dev/null || echo 2) + 1 )))

# The checks below expect DATABASE_URL when they touch the database; run them through `make test`.
# PYTEST_ARGS is for you (a subset: `make pytest PYTEST_ARGS=tests/unit`); PYTEST_COV_ARGS is set by `make test`.
pytest: $(STAMP)
	$(BIN)/python -m pytest -n $(PYTEST_WORKERS) $(PYTEST_COV_ARGS) $(PYTEST_ARGS)

# The built wheel, not the checkout (devtools/wheel_check.py): twine check, every package file in the
# wheel, then migrate, check, the demo and a smoke test in a fresh venv outside the checkout.
wheel-check: $(STAMP)
	$(WITHDB) --throwaway -- $(BIN)/python -m devtools.wheel_check

migrations-check: $(STAMP)
	$(BIN)/python manage.py makemigrations --check --dry-run

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

format: $(STAMP)
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

docs: $(STAMP)
	$(BIN)/mkdocs build --strict --site-dir .site 2>&1 | { grep -v '^INFO' || true; }; exit $${PIPESTATUS[0]}

matrix: $(STAMP)
	$(BIN)/nox $(NOX_ARGS)

# The ends of the declared ranges the full suites do not reach (noxfile.py UPSTREAM): the oldest
# django-q2 under the adapter's tests, Django 6.0 under the task backend's, with the canaries; then
# Django's and django-tasks-db's own task tests, unchanged, on our backend (devtools/upstream_contract.py).
versions: $(STAMP)
	$(BIN)/nox --session upstream contract

# mutmut 3 ([tool.mutmut] in pyproject.toml) from scratch, then the score; fails below 90 % killed.
mutation: $(STAMP)
	rm -rf mutants .mutmut-results.txt
	$(BIN)/mutmut run --max-children $(or $(MUTATION_JOBS),2)
	$(BIN)/mutmut results --all true > .mutmut-results.txt
	$(BIN)/python -m devtools.mutation_score .mutmut-results.txt

# The peers of the side-by-side benchmark: pyproject.toml's `bench` extra, once per venv.
BENCH_STAMP := $(VENV)/.installed-bench-$(DJANGO)
$(BENCH_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[bench]' 'django~=$(DJANGO).0'
	touch $@

# Benchmarks (docs/performance.md), not part of make test: our figures beside django-q2's,
# procrastinate's and django-tasks-db's (BENCH_PEERS_ARGS, e.g. "--jobs 1000 --rounds 1 --only ours
# procrastinate"), worker throughput and latency with the claim's EXPLAIN, then the dead-letter admin
# on 1,000,000 rows, 1,000 schedules, the claim with pauses and breakers (bench/holds.py), and bulk
# requeue/discard of 10,000 and 100,000 dead letters beside the per-row way and the floor (bench/requeue.py),
# the failure groups of 1,000,000 dead letters (bench/failure_groups.py), and 10,000 jobs drained alone, as a
# batch with a callback and fanned out and in (bench/flows.py).
bench: $(BENCH_STAMP)
	$(WITHDB) --throwaway -- $(BIN)/python -m bench.sidebyside $(BENCH_PEERS_ARGS)
	$(WITHDB) --throwaway -- $(BIN)/python bench/run.py --explain $(BENCH_ARGS)
	$(WITHDB) --throwaway -- $(BIN)/python bench/deadletters.py $(BENCH_DEADLETTER_ARGS)
	$(WITHDB) --throwaway -- $(BIN)/python bench/schedules.py $(BENCH_SCHEDULE_ARGS)
	$(WITHDB) --throwaway -- $(BIN)/python bench/holds.py $(BENCH_HOLDS_ARGS)
	$(WITHDB) --throwaway -- $(BIN)/python bench/requeue.py $(BENCH_REQUEUE_ARGS)
	$(WITHDB) --throwaway -- $(BIN)/python bench/failure_groups.py $(BENCH_GROUPS_ARGS)
	$(WITHDB) --throwaway -- $(BIN)/python bench/limits.py $(BENCH_LIMITS_ARGS)
	$(WITHDB) --throwaway -- $(BIN)/python bench/flows.py $(BENCH_FLOWS_ARGS)

# Large tables and memory (issue 12; docs/performance.md), each in a scratch database it drops:
# options in BENCH_LARGE_ARGS (e.g. "--succeeded 100000") and BENCH_MEMORY_ARGS (e.g. "--jobs 300000").
bench-large: $(STAMP)
	$(WITHDB) --throwaway -- $(BIN)/python bench/large_tables.py $(BENCH_LARGE_ARGS)

bench-memory: $(STAMP)
	$(WITHDB) --throwaway -- $(BIN)/python bench/memory.py $(BENCH_MEMORY_ARGS)

# django-q2 clusters with and without the adapter, same tasks, same database (docs/performance.md);
# options in BENCH_Q2_ARGS, e.g. "--tasks 5000 --workers 4".
bench-django-q2: $(STAMP)
	$(WITHDB) --throwaway -- $(BIN)/python bench/django_q2.py $(BENCH_Q2_ARGS)

# Debian's chromium for the real-browser tests (tests/browser, which skip without it); Playwright
# never downloads a browser of its own. Nothing to do when /usr/bin/chromium is there.
browser:
	@if [ -x /usr/bin/chromium ]; then echo "browser: /usr/bin/chromium is installed"; exit 0; fi; \
	command -v apt-get >/dev/null 2>&1 || { echo "make browser: no apt-get here; install Chromium yourself and" \
		"set JOBRETRY_CHROMIUM=/path/to/chromium (never \`playwright install\`)" >&2; exit 1; }; \
	if [ "$$(id -u)" = 0 ]; then sudo=; \
	elif command -v sudo >/dev/null 2>&1; then sudo=sudo; \
	else echo "make browser: not root and no sudo, so apt-get cannot install chromium" >&2; exit 1; fi; \
	echo "browser: installing Debian's chromium with apt-get (takes a minute)"; \
	$$sudo env DEBIAN_FRONTEND=noninteractive apt-get update -q || exit 1; \
	$$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium || exit 1; \
	test -x /usr/bin/chromium || { echo "make browser: apt-get left no /usr/bin/chromium" >&2; exit 1; }

# Debian's pgbouncer for the PgBouncer tests (tests/pgbouncer.py starts its own instance with its own
# configuration; the system service the package may install is never used). Nothing to do when installed.
pgbouncer:
	@if command -v pgbouncer >/dev/null 2>&1 || [ -x /usr/sbin/pgbouncer ]; then echo "pgbouncer: installed"; exit 0; fi; \
	command -v apt-get >/dev/null 2>&1 || { echo "make pgbouncer: no apt-get here; install pgbouncer yourself" >&2; exit 1; }; \
	if [ "$$(id -u)" = 0 ]; then sudo=; \
	elif command -v sudo >/dev/null 2>&1; then sudo=sudo; \
	else echo "make pgbouncer: not root and no sudo, so apt-get cannot install pgbouncer" >&2; exit 1; fi; \
	echo "pgbouncer: installing Debian's pgbouncer with apt-get"; \
	$$sudo env DEBIAN_FRONTEND=noninteractive apt-get update -q || exit 1; \
	$$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q pgbouncer || exit 1; \
	test -x /usr/sbin/pgbouncer || { echo "make pgbouncer: apt-get left no /usr/sbin/pgbouncer" >&2; exit 1; }

clean:
	rm -rf .venv .venv-django* .nox .site mutants .pgdata .mutmut-results.txt .coverage .coverage.*

# Chaos harness (docs/reliability.md), not part of make test: workers under SIGKILL, SIGSTOP, killed
# sessions, a database restart, partitions and more, then SQL invariants. It starts its own embedded
# PostgreSQL when DATABASE_URL is unset (and then restarts it as a fault); CHAOS_ARGS e.g. "--seed 3 --logs DIR".
.PHONY: chaos chaos-ci chaos-partition chaos-netns chaos-flows
chaos: $(STAMP)
	$(BIN)/python -m chaos --size soak $(CHAOS_ARGS)

chaos-ci: $(STAMP)
	$(BIN)/python -m chaos --size ci $(CHAOS_ARGS)

# 200 flows of five steps and two callbacks among SIGKILLs, pauses and a restart (chaos/flows.py;
# about three minutes): every flow completed, every step succeeded once, none before its parents.
chaos-flows: $(STAMP)
	$(BIN)/python -m chaos --size flows $(CHAOS_ARGS)

# Partition faults through a relay per worker (no root needed; about 1.5 minutes).
chaos-partition: $(STAMP)
	$(BIN)/python -m chaos --size partition $(CHAOS_ARGS)

# The same with each worker in a network namespace of its own, cut off by the kernel (chaos/netns.py):
# needs root and ip (iproute2); says why and exits 2 where they are missing. Not part of make test.
chaos-netns: $(STAMP)
	$(BIN)/python -m chaos --size partition --netns $(CHAOS_ARGS)
