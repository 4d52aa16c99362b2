# The two commands a newcomer needs: `make up` and `make test`; `make install` puts `berth` on the PATH. See README.md.
SHELL := /bin/bash
export TURBO_TELEMETRY_DISABLED := 1
export DO_NOT_TRACK := 1
BERTH := node cli/dist/bin.js
# The commands `make up` and `make test` run (a test of the steps puts stand-ins in their place).
NPM := npm
TURBO := npx turbo
ENSURE_PODMAN := scripts/ensure-podman.sh
# A step's line: the first `make up` installs and builds for minutes, and should say so as it goes.
STEP := @printf '==> %s\n'

.PHONY: up down test install uninstall deps build typecheck clean images

## Install, then start a supervisor that runs Postgres under .berth/, (as root) a private Podman engine
## for sandboxes and the platform (every service in one process), restarting any that crashes; print URL and key.
up: sandbox-tools build
	$(STEP) 'Starting Berth: Postgres, the sandbox engine, the platform…'
	@$(BERTH) up

# Sandboxes need Podman, runc and gcc, which ensure-podman.sh installs as root with apt-get; without
# them Berth still starts, and sandbox calls answer 503 saying why.
.PHONY: sandbox-tools
sandbox-tools:
	$(STEP) 'Checking the sandbox tools (Podman, runc, …; apt-get installs what is missing)'
	@$(ENSURE_PODMAN) || echo "Berth will start without sandboxes." >&2

## Stop the supervisor, the platform, the sandbox engine and Postgres (data and sandbox files stay under .berth/).
down:
	@if [ -f cli/dist/bin.js ]; then $(BERTH) down; fi

## Run every test tier (unit, integration, sandbox, browser, e2e: test-tiers.mjs), each tier starting what it needs
## (Postgres, Redis, S3, a private Podman engine as root, Chromium); the last line is `N passed, N failed`.
## The slowest files are printed before it; .berth/test-timings.tsv has every file's time.
# test-tools first: building the sandbox agent needs gcc, which ensure-podman.sh installs.
test: test-tools build typecheck lint format-check
	@node scripts/run-tests.mjs $(ARGS)

## One tier, for a developer's loop (ARGS go to jest, e.g. ARGS=libs/http). test-unit needs no build,
## no root and no server (docs/contribute/testing.md).
.PHONY: test-unit test-integration test-sandbox test-browser test-e2e
test-unit: deps
	@node scripts/run-tests.mjs --tier unit $(ARGS)

test-integration: test-redis test-promtool build
	@node scripts/run-tests.mjs --tier integration $(ARGS)

test-sandbox: test-redis test-podman build
	@node scripts/run-tests.mjs --tier sandbox $(ARGS)

test-browser: test-redis test-chromium build
	@node scripts/run-tests.mjs --tier browser $(ARGS)

test-e2e: test-redis test-podman build
	@node scripts/run-tests.mjs --tier e2e $(ARGS)

.PHONY: test-tools test-redis test-podman test-chromium test-promtool
test-tools: test-redis test-podman test-chromium test-promtool

test-redis:
	@scripts/ensure-debian-package.sh redis-server redis-server

test-podman:
	@scripts/ensure-podman.sh

test-chromium:
	@scripts/ensure-debian-package.sh chromium chromium fonts-dejavu-core

# The chart's alert tests run promtool (from Debian's prometheus package, whose server is not started).
test-promtool:
	@scripts/ensure-promtool.sh

## Build the platform and agent-server images (images/Containerfile) with Docker or Podman, whichever
## is installed, as $(IMAGE_REPOSITORY)/platform:$(IMAGE_TAG) and $(IMAGE_REPOSITORY)/agent-server:$(IMAGE_TAG).
IMAGE_REPOSITORY ?= berth
IMAGE_TAG ?= dev
images:
	@IMAGE_REPOSITORY='$(IMAGE_REPOSITORY)' IMAGE_TAG='$(IMAGE_TAG)' images/build.sh

## Build both images with Podman against a stand-in Node base (no registry needed) and run the platform
## image against the test Postgres; about 9 min the first time (stand-in base 1 min, images 6.5 min on 2 cores), about 3 min when
## the base and the npm layers are cached. CI runs it after `make test`.
.PHONY: test-images
test-images: test-tools build
	@node scripts/run-tests.mjs --tier images $(ARGS)

## Build and link the `berth` command of this checkout into BINDIR (default: PREFIX/bin if PREFIX is
## set, else /usr/local/bin as root, else ~/.local/bin), so that it works in any folder.
install: build
	@BINDIR='$(BINDIR)' PREFIX='$(PREFIX)' scripts/install-cli.sh install

## Remove that link (the same BINDIR/PREFIX as for install).
uninstall:
	@BINDIR='$(BINDIR)' PREFIX='$(PREFIX)' scripts/install-cli.sh uninstall

deps: node_modules/.berth-installed

# npm ci only when the lockfile changed since the last install.
node_modules/.berth-installed: package-lock.json
	$(STEP) 'Installing npm dependencies (npm ci; about a minute the first time)'
	$(NPM) ci --no-fund --no-audit
	@touch $@

# A line per package turbo builds (none for those built before); a package's own output only when
# it says something (a compile error), without npm's banner lines.
build: deps
	$(STEP) 'Building the packages (turbo; about two minutes the first time)'
	@set -o pipefail; $(TURBO) run build --output-logs=new-only | sed -u -E \
	  -e '/^[^ ]+:build: ((> .*)?|cache hit.*)$$/d' \
	  -e 's/^([^ ]+):build: cache (miss|bypass).*/   building \1/'

## Rewrite the generated reference pages (docs/reference: REST, CLI, settings, Helm values) from the
## routes, the commander program, each env.ts and the chart; cli/src/docs/docs.test.ts fails until they are current.
.PHONY: docs
docs: deps
	@node --conditions=berth-source --import tsx cli/src/docs/write.ts

## Type-check tests too (the build skips them; jest strips types without checking).
typecheck: deps
	@npx tsc -p tsconfig.tests.json
	@npx tsc -p tsconfig.pages.json

## ESLint (tools/lint/eslint.config.mjs): floating promises, swallowed errors, import cycles, and the
## project's rules (tools/lint/plugin.mjs): process.env only in env.ts, statuses only by move functions, file length.
.PHONY: lint
lint: deps
	@npx eslint --cache --cache-location node_modules/.cache/eslint/ .

## Prettier (tools/lint/prettier.config.mjs, scope in .prettierignore): `format` rewrites the code's layout;
## `format-check` (part of `make test`) lists the files it would change and fails if there are any.
.PHONY: format format-check
format: deps
	@npx prettier --write --cache --log-level warn .
format-check: deps
	@npx prettier --check --cache --log-level warn . || { echo "Run make format to lay these files out." >&2; exit 1; }

clean:
	rm -rf node_modules .turbo */*/dist */dist */*/*.tsbuildinfo */*.tsbuildinfo

## Benchmarks (bench/, each its own npm project): Berth vs its anchor; figures go to docs/benchmarks.md.
.PHONY: bench
bench: build bench/agent-server/node_modules/.bench-installed
	@node bench/agent-server/run.mjs
	@node bench/deploy/run.mjs
	@node bench/containment/run.mjs
	@node bench/sandboxes/run.mjs

bench/agent-server/node_modules/.bench-installed: bench/agent-server/package-lock.json
	cd bench/agent-server && npm ci --no-fund --no-audit
	@touch $@
