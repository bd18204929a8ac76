# dedupe: `make help` lists the targets. Needs GNU make, Go and Node.js/npm.
#
# Every `## ` comment after a target is its line in `make help`.

SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help
MAKEFLAGS += --no-print-directory

GO  ?= go
NPM ?= npm

# PKG narrows test and bench, e.g. `make test PKG=./pkg/dynamostore/...`.
PKG          ?= ./...
TEST_TIMEOUT ?= 20m
BENCH        ?= .

# The Lambda functions, one directory under functions/ each.
FUNCTIONS := api reaper

# npm ci writes node_modules; the stamp inside it records a finished install,
# so deleting node_modules or changing the lockfile triggers a new one.
DEPS_STAMP := localtest/node_modules/.make-deps.stamp

# withdynalite runs a command with AWS_ENDPOINT_URL_DYNAMODB set, starting
# dynalite for it unless the variable is already set. It is built rather
# than `go run` so that CMD's exit code and SIGTERM pass through unchanged.
WITHDYNALITE := build/bin/withdynalite
# withservers does the same for DATABASE_URL (a throwaway PostgreSQL
# cluster), PGBOUNCER_URL (PgBouncer in transaction mode in front of it),
# REDIS_URL (redis-server without persistence) and REDIS_CLUSTER_URL (a
# Redis Cluster of three such servers).
WITHSERVERS  := build/bin/withservers
RIE          := build/bin/aws-lambda-rie

# go_build builds ./functions/$(1) for GOOS $(2) and GOARCH $(3) into $(4):
# static (no cgo), without the legacy RPC runtime (provided.al2023 uses the
# Runtime API), without paths or symbol tables.
go_build = CGO_ENABLED=0 GOOS=$(2) GOARCH=$(3) $(GO) build -tags lambda.norpc -trimpath -ldflags '-s -w' -o $(4) ./functions/$(1)

# Lambda target platform, as template.yaml declares it (Architectures: [arm64]).
LAMBDA_GOOS   := linux
LAMBDA_GOARCH := arm64
HOST_GOOS     := $(shell $(GO) env GOOS)
HOST_GOARCH   := $(shell $(GO) env GOARCH)

LAMBDA_BINS := $(FUNCTIONS:%=build/%/bootstrap)
LOCAL_BINS  := $(FUNCTIONS:%=build/local/%/bootstrap)

.PHONY: help deps test bench build build-local run deploy validate deploy-rehearsal clean fmt vet lint rie withdynalite withservers FORCE \
	build-ApiFunction build-ReaperFunction

help: ## list the targets
	@awk 'BEGIN { FS = ":.*## " } /^[A-Za-z_-]+:.*## / { printf "  %-22s %s\n", $$1, $$2 }' $(MAKEFILE_LIST)

deps: $(DEPS_STAMP) ## install dynalite (npm ci, only when needed) and download Go modules; redis-server and pgbouncer too, as root on Debian
	$(GO) mod download
	@missing=; \
	  command -v redis-server >/dev/null || command -v valkey-server >/dev/null || missing=" redis-server"; \
	  command -v pgbouncer >/dev/null || [ -x /usr/sbin/pgbouncer ] || missing="$$missing pgbouncer"; \
	  if [ -z "$$missing" ]; then :; \
	  elif [ "$$(id -u)" = 0 ] && [ -f /etc/debian_version ]; then apt-get update -qq && apt-get install -y -qq $$missing; \
	  else echo "make deps: missing$$missing; install with: sudo apt-get install -y$$missing"; fi

$(DEPS_STAMP): localtest/package.json localtest/package-lock.json
	$(NPM) ci --prefix localtest --no-audit --no-fund
	touch $@

# The packages whose tests talk to DynamoDB. Unless DEDUPE_DYNAMODB or
# AWS_ENDPOINT_URL_DYNAMODB picks one server, `make test` runs them a second
# time on moto_server, so every store test passes on two implementations.
DYNAMODB_PKGS := ./pkg/dedupe ./pkg/dynamostore ./functions/reaper ./functions/api/internal/payments ./infra ./localtest/dynamotest

# DEDUPE_DYNAMODB picks the server of `make test` and `make bench`: dynalite,
# moto or an endpoint URL (see localtest/cmd/withdynalite).
DEDUPE_DYNAMODB ?=
export DEDUPE_DYNAMODB

test: deps withdynalite withservers ## go vet, then go test -race of PKG (default ./...) against fresh dynalite, PostgreSQL and Redis, and its DynamoDB packages again on moto
	$(GO) vet ./...
	$(WITHDYNALITE) -- $(WITHSERVERS) -- $(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) $(PKG)
	@if [ -n "$(DEDUPE_DYNAMODB)$${AWS_ENDPOINT_URL_DYNAMODB:-}" ]; then exit 0; fi; \
	pkgs=$$(comm -12 <($(GO) list $(PKG) | sort) <($(GO) list $(DYNAMODB_PKGS) | sort)); \
	if [ -z "$$pkgs" ]; then exit 0; fi; \
	if ! command -v moto_server >/dev/null; then \
		if [ -n "$${CI:-}" ]; then echo "moto_server is required in CI: pip install 'moto[server]'" >&2; exit 1; fi; \
		echo "SKIP the second DynamoDB run: moto_server not found (pip install 'moto[server]')" >&2; exit 0; \
	fi; \
	echo "$(WITHDYNALITE) -server moto -- $(GO) test -race -count=1 -timeout $(TEST_TIMEOUT)" $$pkgs; \
	$(WITHDYNALITE) -server moto -- $(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) $$pkgs

# BENCH_PKG are the packages whose Go benchmarks `make bench` runs after
# its report (the stores' round trips and floors among them).
BENCH_PKG ?= ./pkg/...

bench: deps withdynalite withservers ## the report (table, build/bench/bench.json and .png), then the Go benchmarks of BENCH_PKG (BENCH selects)
	$(WITHDYNALITE) -- $(GO) run ./localtest/cmd/bench -out build/bench
	$(WITHDYNALITE) -- $(WITHSERVERS) -- $(GO) test -run '^$$' -bench '$(BENCH)' -benchmem $(BENCH_PKG)

withdynalite:
	$(GO) build -o $(WITHDYNALITE) ./localtest/cmd/withdynalite

withservers:
	$(GO) build -o $(WITHSERVERS) ./localtest/cmd/withservers

build: $(LAMBDA_BINS) ## build the functions for Lambda (linux/arm64) into build/<function>/bootstrap
	@ls -lh $^ | awk '{ printf "  %6s  %s\n", $$5, $$NF }'

build-local: $(LOCAL_BINS) ## build the functions for this machine into build/local/<function>/bootstrap
	@ls -lh $^ | awk '{ printf "  %6s  %s\n", $$5, $$NF }'

# Go tracks its own dependencies, so these always run `go build` (cached).
# build/local/% has the shorter stem, so GNU make picks it for local builds.
build/local/%/bootstrap: FORCE
	$(call go_build,$*,$(HOST_GOOS),$(HOST_GOARCH),$@)

build/%/bootstrap: FORCE
	$(call go_build,$*,$(LAMBDA_GOOS),$(LAMBDA_GOARCH),$@)

# `sam build` calls these (Metadata: BuildMethod: makefile) with ARTIFACTS_DIR
# set, and zips $(ARTIFACTS_DIR)/bootstrap.
build-ApiFunction: ## (called by sam build) build the API function into $(ARTIFACTS_DIR)/bootstrap
	$(if $(ARTIFACTS_DIR),,$(error ARTIFACTS_DIR is not set: this target is for sam build))
	$(call go_build,api,$(LAMBDA_GOOS),$(LAMBDA_GOARCH),$(ARTIFACTS_DIR)/bootstrap)

build-ReaperFunction: ## (called by sam build) build the reaper into $(ARTIFACTS_DIR)/bootstrap
	$(if $(ARTIFACTS_DIR),,$(error ARTIFACTS_DIR is not set: this target is for sam build))
	$(call go_build,reaper,$(LAMBDA_GOOS),$(LAMBDA_GOARCH),$(ARTIFACTS_DIR)/bootstrap)

rie: ## build the Lambda Runtime Interface Emulator into build/bin/aws-lambda-rie
	$(GO) build -o $(RIE) github.com/aws/aws-lambda-runtime-interface-emulator/cmd/aws-lambda-rie

# RUN_ARGS passes flags to the local stack, e.g. `make run RUN_ARGS='-port 3001'`.
# It is built, not `go run`, so that Ctrl-C and SIGTERM reach it directly.
run: deps build-local rie ## run the whole stack locally: API on 127.0.0.1:3000, dynalite, reaper (Ctrl-C stops it)
	$(GO) build -o build/bin/local ./localtest/cmd/local
	build/bin/local $(RUN_ARGS)

deploy: ## sam build, then sam deploy with samconfig.toml's defaults (needs the SAM CLI and AWS credentials; not run in CI)
	sam build
	sam deploy

deploy-rehearsal: ## what sam build + sam deploy would do, against a moto_server it starts: build, upload, transform, create, update, delete, checked
	$(GO) run ./localtest/cmd/rehearse $(REHEARSAL_ARGS)

validate: ## lint template.yaml: sam validate --lint, or without the SAM CLI cfn-lint on it and on its offline SAM transform
	$(GO) run ./infra/cmd/validate -o build/template.transformed.json

fmt: ## gofmt every Go file in place
	$(GO) fmt ./...

vet: ## go vet every package
	$(GO) vet ./...

lint: vet ## go vet, then fail if a file needs gofmt
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "needs gofmt:"; echo "$$out"; exit 1; fi

clean: ## remove build/ and localtest/node_modules
	rm -rf build localtest/node_modules
