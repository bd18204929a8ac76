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
# TEST_TIMEOUT only catches a hung test binary: a busy machine can take
# many minutes to build a package's test processes.
TEST_TIMEOUT ?= 30m
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
# The host's, asked only by the rules that use them (make run's
# build-local): every make, the sub-makes of make test's build pass and of
# the SAM build tests included, parsed them at start, one go command each.
HOST_GOOS      = $(shell $(GO) env GOOS)
HOST_GOARCH    = $(shell $(GO) env GOARCH)

LAMBDA_BINS := $(FUNCTIONS:%=build/%/bootstrap)
LOCAL_BINS  := $(FUNCTIONS:%=build/local/%/bootstrap)

.PHONY: help deps deps-run deps-test test apicompat api-snapshot stress bench versus mutate race build build-local run deploy validate deploy-rehearsal clean fmt vet lint rie withdynalite withservers FORCE \
	build-ApiFunction build-ReaperFunction

help: ## list the targets
	@awk 'BEGIN { FS = ":.*## " } /^[A-Za-z_-]+:.*## / { printf "  %-22s %s\n", $$1, $$2 }' $(MAKEFILE_LIST)

deps: deps-run deps-test ## deps-run and deps-test

deps-run: $(DEPS_STAMP) ## what `make run` needs: dynalite (npm ci, only when needed) and the Go modules; installs no system package
	$(GO) mod download

# Only `make test` and `make bench` install system packages, and only
# what is missing: the Redis and PgBouncer servers the store tests start.
# As root on Debian they come from apt-get, after one line saying so;
# elsewhere the line says how to install them.
deps-test: deps-run ## what `make test` needs besides: redis-server and pgbouncer (apt-get install as root on Debian, only when missing)
	@missing=; \
	  command -v redis-server >/dev/null || command -v valkey-server >/dev/null || missing=" redis-server"; \
	  command -v pgbouncer >/dev/null || [ -x /usr/sbin/pgbouncer ] || missing="$$missing pgbouncer"; \
	  if [ -z "$$missing" ]; then :; \
	  elif [ "$$(id -u)" = 0 ] && [ -f /etc/debian_version ]; then \
	    echo "make: apt-get install$$missing: the redisstore and pgstore tests start these servers"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive DEBCONF_NOWARNINGS=yes apt-get install -y -qq$$missing >/dev/null; \
	  else echo "make: missing$$missing, which the redisstore and pgstore tests need; install with: sudo apt-get install -y$$missing"; fi

$(DEPS_STAMP): localtest/package.json localtest/package-lock.json
	$(NPM) ci --prefix localtest --no-audit --no-fund
	touch $@

# The packages whose tests talk to DynamoDB. Unless DEDUPE_DYNAMODB or
# AWS_ENDPOINT_URL_DYNAMODB picks one server, `make test` runs them a second
# time on moto_server, so every store test passes on two implementations.
DYNAMODB_PKGS := ./pkg/dedupe ./pkg/dynamostore ./functions/reaper ./functions/api/internal/payments ./infra/internal/ensuretest ./localtest/dynamotest ./infra/internal/permtest

# SLOW_PKGS are the packages that take longest, slowest first. The test
# passes start them before the others, so that two long packages do not
# start last and run on alone (go test runs packages in the order given).
SLOW_PKGS := ./infra ./localtest/e2e ./pkg/dynamostore ./pkg/pgstore ./localtest/cmd/rehearse ./pkg/redisstore ./localtest/gateway ./localtest/cmd/local ./localtest/cmd/bench ./pkg/dedupe

# slow_first prints the packages of $(1), those of SLOW_PKGS first.
slow_first = { $(GO) list $(SLOW_PKGS); echo --; $(GO) list $(1); } | \
	awk '$$0 == "--" { all = 1; next } !all { slow[++n] = $$0; isslow[$$0] = 1; next } { in_pkg[$$0] = 1; rest[++m] = $$0 } \
	END { for (i = 1; i <= n; i++) if (slow[i] in in_pkg) print slow[i]; for (i = 1; i <= m; i++) if (!(rest[i] in isslow)) print rest[i] }'

# DEDUPE_DYNAMODB picks the server of `make test` and `make bench`: dynalite,
# moto or an endpoint URL (see localtest/cmd/withdynalite).
DEDUPE_DYNAMODB ?=
export DEDUPE_DYNAMODB

# SUBMAKE is $(MAKE) under another name, for the test and stress recipes:
# GNU make runs a recipe line that names $(MAKE) even under -n, and each of
# those recipes is one line, so `make -n test` ran the whole suite.
SUBMAKE = $(MAKE)

# TEST_LOG keeps each pass's output, the summary and the package times.
TEST_LOG := build/test

# TEST_FLAGS adds flags to every `go test` of `make test`, e.g. -v.
TEST_FLAGS ?=

# TEST_P is how many test binaries the dynalite+servers pass runs at once:
# one more than the cores. Its packages wait on their servers and on the
# processes they start, so with one per core (go test's default) a 2-core
# machine sat 20 to 50% idle in the last 100 s of a warm run, once the moto
# pass had ended; with one more it stays busy to the end. The gain is
# within this machine's noise so far: warm runs took 235 to 305 s (mean
# 273 s, five runs) at -p 3, and 270 to 293 s (mean 281 s, three) at -p 2.
TEST_P ?= $(shell echo $$(( $$(nproc 2>/dev/null || echo 2) + 1 )))

# TEST_BUILD_FLAGS decide how `make test` compiles every package. The vet
# pass, the tests, withservers and what the tests build to run (the
# product's bootstraps under the emulator, make run's command; see
# internal/goflavour)
# all use them, so that with empty Go caches each package is compiled once,
# in one flavour, and found in Go's build cache by everything after:
#   -race       the tests run with the race detector, so vet and the tools
#               compile what the tests compile;
#   -trimpath   compiled packages do not depend on where the checkout is,
#               so a fresh clone (as CI makes) finds them in the cache too.
# Only the emulator, withdynalite and the gateway's test function (echofn)
# are built otherwise (static, from the standard library and a few packages
# of their own): none is under test, the first two carry the tests'
# traffic (withdynalite proxies moto's), with -race the emulator made the
# gateway tests 2.4 times slower, and a race-built echofn took five times
# the CPU at each of its some thirty starts.
TEST_BUILD_FLAGS := -race -trimpath

# GO_VET and GO_TEST are the go vet and go test of `make test` (GO_TEST also
# of `make stress`). Their flags are chosen for time, and drop no check:
#   TEST_BUILD_FLAGS as above;
#   -ldflags=-w test binaries are linked without DWARF, which only a
#               debugger reads (panics and race reports symbolize from the
#               binary's own tables): some 50 test binaries are linked
#               afresh on every run, and DWARF was a fifth of each link;
#   -vet=off    go test's own vet subset: make test's vet pass runs every
#               check on the same code.
GO_VET  = $(GO) vet $(TEST_BUILD_FLAGS)
GO_TEST = $(GO) test $(TEST_BUILD_FLAGS) -vet=off -count=1 -ldflags=-w -timeout $(TEST_TIMEOUT) $(TEST_FLAGS)

# test_pass NAME CMD... runs one pass of `make test`: it prints CMD, runs it
# with its output copied to $(TEST_LOG)/NAME.log, and writes "PASS NAME (N s)"
# or "FAIL NAME (N s)" to $(TEST_LOG)/NAME.result. test_pass_bg does the same
# with the output going to the log only, for a pass that runs in the
# background; its log is printed when it has ended. A failed pass does not
# stop the next one; the results decide the exit code at the end.
define test_pass_fn
test_pass() { local name=$$1 start=$$SECONDS r=PASS; shift; echo "$$*"; \
  "$$@" 2>&1 | tee $(TEST_LOG)/$$name.log || r=FAIL; \
  echo "$$r $$name ($$((SECONDS - start)) s)" >$(TEST_LOG)/$$name.result; }; \
test_pass_bg() { local name=$$1 start=$$SECONDS r=PASS; shift; \
  "$$@" >$(TEST_LOG)/$$name.log 2>&1 || r=FAIL; \
  echo "$$r $$name ($$((SECONDS - start)) s)" >$(TEST_LOG)/$$name.result; }
endef

# test: the passes, one line each at the end, then the five slowest packages.
#   vet               go vet -race ./... (GO_VET): every check of go vet,
#                     on the code go test -race compiles, so that the
#                     packages vet compiles are the ones the test passes
#                     reuse (with empty Go caches, plain go vet compiled
#                     every dependency a second time)
#   apicompat         the API of pkg/... against the newest release's
#                     snapshot under api/ (make apicompat): an incompatible
#                     change fails unless the CHANGELOG's Unreleased heading
#                     names a breaking bump (docs/versioning.md)
#   build             the Lambda binaries (linux/arm64), the local ones and
#                     the emulator, as `make build build-local rie`, once
#                     (`make run`'s test, TestMakeRunSmoke, then finds the
#                     local ones built): the tests of the SAM build
#                     targets and the deploy rehearsal then find the compiled
#                     packages in Go's build cache, and the end-to-end,
#                     gateway and `make run` tests the emulator built,
#                     instead of compiling the same code in several test
#                     processes at the same time (the bootstraps these tests
#                     build for this machine come from vet's packages)
#   dynalite+servers  go test -race of PKG on dynalite, PostgreSQL and Redis,
#                     TEST_P test binaries at a time
#   moto              the DynamoDB packages of PKG again, on moto_server. It
#                     runs alongside dynalite+servers, on servers of its own,
#                     because the first pass leaves a core idle a fifth of the
#                     time, waiting on its servers; its log is printed when
#                     the first pass has ended.
#   bench             every Go benchmark of BENCH_PKG that is in PKG, once
#                     (-benchtime 1x, -short: the heavy sizes left out),
#                     on fresh servers, so that the benchmarks `make bench`
#                     runs still run; it overlaps the end of the moto pass.
#                     No figure of it means anything: `make bench` measures.
test: deps-test withdynalite withservers ## go vet, the Lambda build, go test -race of PKG (default ./...) on fresh dynalite, PostgreSQL and Redis, and alongside it its DynamoDB packages on moto; one PASS/FAIL line per pass
	@mkdir -p $(TEST_LOG); rm -f $(TEST_LOG)/summary $(TEST_LOG)/*.result; $(test_pass_fn); \
	passes="vet apicompat build dynalite+servers moto bench"; \
	test_pass vet $(GO_VET) ./...; \
	test_pass apicompat $(APICOMPAT); \
	test_pass build $(SUBMAKE) build build-local rie; \
	all=$$($(call slow_first,$(PKG))); \
	pkgs=$$(grep -Fxf <($(GO) list $(DYNAMODB_PKGS)) <<<"$$all" || true); moto_pid=; \
	if [ -n "$(DEDUPE_DYNAMODB)$${AWS_ENDPOINT_URL_DYNAMODB:-}" ]; then \
		echo "SKIP moto (DEDUPE_DYNAMODB or AWS_ENDPOINT_URL_DYNAMODB picks one server)" >$(TEST_LOG)/moto.result; \
	elif [ -z "$$pkgs" ]; then \
		echo "SKIP moto (no DynamoDB package in PKG)" >$(TEST_LOG)/moto.result; \
	elif ! command -v moto_server >/dev/null; then \
		if [ -n "$${CI:-}" ]; then echo "FAIL moto (moto_server is required in CI: pip install 'moto[server]')" >$(TEST_LOG)/moto.result; \
		else echo "SKIP moto (moto_server not found: pip install 'moto[server]')" >$(TEST_LOG)/moto.result; fi; \
	else \
		echo "$(WITHDYNALITE) -server moto -- $(GO_TEST)" $$pkgs "(in the background, into $(TEST_LOG)/moto.log)"; \
		test_pass_bg moto $(WITHDYNALITE) -server moto -- $(GO_TEST) $$pkgs & moto_pid=$$!; \
		trap '[ -z "$$moto_pid" ] || kill -- $$moto_pid 2>/dev/null || true' EXIT; \
	fi; \
	test_pass dynalite+servers $(WITHDYNALITE) -- $(WITHSERVERS) -- $(GO_TEST) -p $(TEST_P) $$all; \
	benchlist=$$($(GO) list $(BENCH_PKG)) || benchlist=FAIL; \
	benchpkgs=$$(grep -Fxf <(echo "$$benchlist") <<<"$$all" || true); \
	if [ "$$benchlist" = FAIL ]; then echo "FAIL bench (go list BENCH_PKG failed: $(BENCH_PKG))" >$(TEST_LOG)/bench.result; \
	elif [ -z "$$benchpkgs" ]; then echo "SKIP bench (no package of BENCH_PKG in PKG)" >$(TEST_LOG)/bench.result; \
	else test_pass bench $(WITHDYNALITE) -- $(WITHSERVERS) -- $(GO_TEST) -short -run '^$$' -bench . -benchtime 1x $$benchpkgs; fi; \
	if [ -n "$$moto_pid" ]; then \
		wait $$moto_pid || true; moto_pid=; \
		echo; echo "moto pass (ran alongside):"; cat $(TEST_LOG)/moto.log; \
	fi; \
	echo; echo "slowest packages (dynalite+servers):"; \
	awk '$$1 == "ok" || $$1 == "FAIL" { if ($$3 ~ /^[0-9.]+s$$/) print "  " $$3 "\t" $$2 }' $(TEST_LOG)/dynalite+servers.log | sort -rn | head -5; \
	for p in $$passes; do cat $(TEST_LOG)/$$p.result 2>/dev/null || echo "FAIL $$p (no result)"; done >$(TEST_LOG)/summary; \
	echo; cat $(TEST_LOG)/summary; \
	! grep -q '^FAIL' $(TEST_LOG)/summary

# APICOMPAT checks the API of pkg/... against the newest snapshot under
# api/ (internal/apicompat, over golang.org/x/exp/cmd/apidiff, a tool
# dependency in go.mod); with -write VERSION it writes that snapshot.
APICOMPAT = $(GO) run ./internal/apicompat/cmd/apicompat

apicompat: ## check the API of pkg/... against the last release's snapshot under api/: an incompatible change fails unless the Unreleased heading of CHANGELOG.md names a breaking bump (docs/versioning.md)
	$(APICOMPAT)

# VERSION is the release api-snapshot writes, e.g. v0.1.0.
VERSION ?=

api-snapshot: ## at a release: write the API of pkg/... into api/$(VERSION)/ and commit it with the release (make api-snapshot VERSION=v0.1.0)
	$(if $(VERSION),,$(error VERSION is not set: make api-snapshot VERSION=v0.1.0))
	$(APICOMPAT) -write $(VERSION)

# `make stress` runs STRESS_PKG with -race STRESS_RUNS times in a row while
# STRESS_CPU busy workers (default: twice the cores) saturate the CPU, to
# show that no test depends on the machine's speed. The workers come from
# stress-ng or stress; without either, as root on Debian, it installs stress
# after one line saying so.
STRESS_PKG  ?= ./localtest/... ./pkg/...
STRESS_RUNS ?= 3
STRESS_CPU  ?= $(shell echo $$(( 2 * $$(nproc 2>/dev/null || echo 2) )))

stress: deps-test withdynalite withservers ## go test -race of STRESS_PKG, STRESS_RUNS times in a row, while stress(1) saturates the CPU; one PASS/FAIL line per run
	@mkdir -p $(TEST_LOG); rm -f $(TEST_LOG)/summary $(TEST_LOG)/*.result; $(test_pass_fn); \
	if command -v stress-ng >/dev/null; then hog="stress-ng --cpu $(STRESS_CPU) --quiet"; \
	elif command -v stress >/dev/null; then hog="stress --cpu $(STRESS_CPU) --quiet"; \
	elif [ "$$(id -u)" = 0 ] && [ -f /etc/debian_version ]; then \
		echo "make stress: apt-get install stress: it saturates the CPU while the tests run"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive DEBCONF_NOWARNINGS=yes apt-get install -y -qq stress >/dev/null; \
		hog="stress --cpu $(STRESS_CPU) --quiet"; \
	else echo "make stress: needs stress-ng or stress: sudo apt-get install -y stress" >&2; exit 1; fi; \
	$(SUBMAKE) build rie >/dev/null; \
	echo "load: $$hog"; setsid $$hog & hog_pid=$$!; \
	trap 'kill -TERM -- -$$hog_pid 2>/dev/null || true; wait $$hog_pid 2>/dev/null || true' EXIT; \
	for i in $$(seq $(STRESS_RUNS)); do \
		test_pass "stress-$$i-of-$(STRESS_RUNS)" $(WITHDYNALITE) -- $(WITHSERVERS) -- $(GO_TEST) $(STRESS_PKG); \
	done; \
	for i in $$(seq $(STRESS_RUNS)); do cat "$(TEST_LOG)/stress-$$i-of-$(STRESS_RUNS).result"; done >$(TEST_LOG)/summary; \
	echo; cat $(TEST_LOG)/summary; \
	echo "$$(grep -c '^PASS' $(TEST_LOG)/summary) of $(STRESS_RUNS) runs passed under load ($$hog)"; \
	! grep -q '^FAIL' $(TEST_LOG)/summary

# BENCH_PKG are the packages whose Go benchmarks `make bench` runs after
# its report (the stores' round trips and floors among them). BENCH_ARGS
# passes flags to the report, e.g. -short (every scenario at a few
# requests: what `make test` runs, in localtest/cmd/bench's TestShort).
BENCH_PKG  ?= ./pkg/...
BENCH_ARGS ?=

bench: deps-test withdynalite withservers ## the report (table, build/bench/bench.json and .png), then the Go benchmarks of BENCH_PKG (BENCH selects)
	$(WITHDYNALITE) -- $(GO) run ./localtest/cmd/bench -out build/bench $(BENCH_ARGS)
	$(WITHDYNALITE) -- $(WITHSERVERS) -- $(GO) test -run '^$$' -bench '$(BENCH)' -benchmem $(BENCH_PKG)

# `make versus REF=<commit>` measures the guard at REF beside the working
# tree's, in turns on one dynalite (localtest/cmd/versus): a latency
# regression shows as a ratio taken in one run. VERSUS_ARGS passes flags,
# e.g. -n 3000. `make test` runs it against HEAD at 5 requests (TestShort).
REF         ?= HEAD
VERSUS_ARGS ?=

versus: deps-run withdynalite ## the guard at REF (a commit, default HEAD) beside the working tree's: fresh and replay p50, side by side in one run
	$(WITHDYNALITE) -- $(GO) run ./localtest/cmd/versus -ref $(REF) $(VERSUS_ARGS)

# `make mutate PKG=./pkg/x` is mutation testing of one package's own files
# with github.com/go-gremlins/gremlins (a go tool dependency): every
# mutant is tested by `go test` of PKG alone, on the servers `make test`
# uses (the S3 tests start their own moto_server). localtest/cmd/mutate
# writes the report, build/mutate/<pkg>.txt, .json and .log, and prints
# the summary. MUTATE_ARGS passes it flags, e.g.
# MUTATE_ARGS='-files=guard.go,cache.go -workers=2', or
# MUTATE_ARGS='-recheck=build/mutate/pkg-x.json' to test only a report's
# survivors again (docs/development.md). It takes long
# (pkg/dedupe: some 30 minutes on 2 cores), so `make test` runs it only on a fixture (TestMakeMutate).
MUTATE_ARGS ?=

mutate: deps-test withdynalite withservers ## mutation testing of one package's own files (make mutate PKG=./pkg/memstore); report in build/mutate/<pkg>.txt, .json and .log
	$(WITHDYNALITE) -- $(WITHSERVERS) -- $(GO) run ./localtest/cmd/mutate $(MUTATE_ARGS) $(PKG)

# RACE_ARGS passes flags to the race, e.g. RACE_ARGS='-n 2,100 -work 1s'.
RACE_ARGS ?=

race: deps-run withdynalite ## race 2, 10 and 50 duplicate processes on dynalite, a naive read-then-write check beside the guard, and count who did the work
	$(WITHDYNALITE) -- $(GO) run ./examples/race $(RACE_ARGS)

# make run's command, its bootstraps, the emulator and withdynalite are
# built static and without paths (HOST_BUILD): make run needs no C
# compiler. withservers is built as the tests are (TOOL_BUILD; see
# TEST_BUILD_FLAGS), from the packages vet and the tests compile.
HOST_BUILD = CGO_ENABLED=0 $(GO) build -trimpath
TOOL_BUILD = $(GO) build $(TEST_BUILD_FLAGS)

withdynalite:
	$(HOST_BUILD) -o $(WITHDYNALITE) ./localtest/cmd/withdynalite

withservers:
	$(TOOL_BUILD) -o $(WITHSERVERS) ./localtest/cmd/withservers

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
	$(HOST_BUILD) -o $(RIE) github.com/aws/aws-lambda-runtime-interface-emulator/cmd/aws-lambda-rie

# RUN_ARGS passes flags to the local stack, e.g. `make run RUN_ARGS='-port 3001'`.
# It is built, not `go run`, so that Ctrl-C and SIGTERM reach it directly.
#
# progress WHAT CMD... runs one build step of make run and says so: a line
# when it starts, one every 15 s while it runs (the first build compiles
# the AWS SDK, the emulator and their dependencies: 5 min 8 s measured on
# a busy 2-core machine with empty Go caches, seconds afterwards), and
# one with its time when it ends.
define progress_fn
progress() { local what=$$1 start=$$SECONDS n=0 pid; shift; echo "make run: building $$what"; \
  "$$@" & pid=$$!; \
  while kill -0 $$pid 2>/dev/null; do sleep 1; n=$$((n + 1)); \
    if [ $$((n % 15)) -eq 0 ] && kill -0 $$pid 2>/dev/null; then echo "make run:   still building $$what ($$((SECONDS - start)) s)"; fi; done; \
  wait $$pid || return; echo "make run:   $$what: $$((SECONDS - start)) s"; }
endef

run: deps-run ## run the whole stack locally: API on 127.0.0.1:3000, dynalite, reaper (Ctrl-C stops it); the first build takes about 5 minutes and says how far it is
	@$(progress_fn); \
	echo "make run: the first build compiles the AWS SDK and the Lambda emulator: about 5 minutes on 2 cores; later ones take seconds"; \
	$(foreach f,$(FUNCTIONS),progress "the $(f) function (build/local/$(f)/bootstrap)" env $(call go_build,$(f),$(HOST_GOOS),$(HOST_GOARCH),build/local/$(f)/bootstrap) && ) \
	progress "the Lambda Runtime Interface Emulator ($(RIE))" env $(HOST_BUILD) -o $(RIE) github.com/aws/aws-lambda-runtime-interface-emulator/cmd/aws-lambda-rie && \
	progress "the local stack (build/bin/local)" env $(HOST_BUILD) -o build/bin/local ./localtest/cmd/local
	build/bin/local $(RUN_ARGS)

deploy: ## sam build, then sam deploy with samconfig.toml's defaults (needs the SAM CLI and AWS credentials; not run in CI)
	sam build
	sam deploy

deploy-rehearsal: ## what sam build + sam deploy would do, against a moto_server it starts: build, upload, transform, create, update, delete, checked
	$(GO) run ./localtest/cmd/rehearse $(REHEARSAL_ARGS)

# TEMPLATE names another template for `make validate`, e.g. your own stack's:
# `make validate TEMPLATE=../my-service/template.yaml`.
TEMPLATE ?=

validate: ## lint template.yaml (or TEMPLATE=path): sam validate --lint or the offline SAM transform, and cfn-lint with dedupe's rules (infra/cfnlint)
	$(GO) run ./infra/cmd/validate -o build/template.transformed.json $(TEMPLATE)

fmt: ## gofmt every Go file in place
	$(GO) fmt ./...

vet: ## go vet every package
	$(GO) vet ./...

lint: vet ## go vet, then fail if a file needs gofmt
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "needs gofmt:"; echo "$$out"; exit 1; fi

clean: ## remove build/ and localtest/node_modules
	rm -rf build localtest/node_modules
