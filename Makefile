# snavio build, test and release targets. `make help` lists them.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := build

GO        ?= go
GOBIN     ?= $(shell $(GO) env GOPATH)/bin
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT    ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
DATE      ?= $(shell date -u +%Y-%m-%dT%H:%M:%SZ)
BUILDPKG  := github.com/snavio/snavio/internal/build
# The same -X flags as .goreleaser.yaml.
LDFLAGS   := -s -w -X $(BUILDPKG).Version=$(VERSION) -X $(BUILDPKG).Commit=$(COMMIT) -X $(BUILDPKG).Date=$(DATE)

# staticcheck 2026.2.2: the module proxy serves it only under its module version.
STATICCHECK_VERSION := v0.8.2
GORELEASER_VERSION  := v2.13.3
FUZZTIME  ?= 20s
BENCHTIME ?= 1s
BENCHCOUNT ?= 5

.PHONY: help
help: ## List the targets
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-14s %s\n", $$1, $$2}'

.PHONY: build
build: ## Build bin/snavio (CGO off, version stamped)
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o bin/snavio ./cmd/snavio

.PHONY: test
test: vet fmt-check staticcheck ## The CI command: vet, gofmt check, staticcheck, and the whole suite with the race detector (includes the stale-generated-files check)
	$(GO) test -race -count=1 ./...

.PHONY: vet
vet: ## go vet
	$(GO) vet ./...

.PHONY: fmt-check
fmt-check: ## Fail if gofmt would change a file
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; echo "run: gofmt -w ."; exit 1; fi

.PHONY: lint
lint: vet fmt-check staticcheck ## go vet + gofmt check + staticcheck

.PHONY: staticcheck
staticcheck: $(GOBIN)/staticcheck
	$(GOBIN)/staticcheck ./...

$(GOBIN)/staticcheck:
	$(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

.PHONY: completions
completions: ## Regenerate completions/ from the command tree
	$(GO) run ./tools/gendocs completions

.PHONY: man
man: ## Regenerate man/ with cobra's doc generator
	$(GO) run ./tools/gendocs man

.PHONY: generate
generate: completions man ## Regenerate every generated file

.PHONY: bench-serve-overload
bench-serve-overload: ## Overload as a mode of bench-serve: 4x the measured capacity for 60 s, open loop; every request answered (200 with per-entry results, or 429/503 with Retry-After), p99 bounded, and a normal send and /readyz 200 within 1 s after (docs/server/README.md, "Overload")
	$(GO) run ./tools/benchserve -overload 4 -duration 60s -sink-duration 10s

.PHONY: bench-serve
bench-serve: ## Commands/s of dispatch serve over loopback vs the same server with a discarding pipeline (run half before and half after), and its heap over 60 s with a 10 s retention (steady state: as much ages out as arrives). In memory first: the pipeline's own cost, held to the 0.5x goal; then the file store (serve's default, --fsync always, and --fsync 100ms), each held to a floor of its own (docs/store/embedded.md, "Reading the 0.5x goal")
	$(GO) run ./tools/benchserve -duration 60s -sink-duration 20s -retention 10s -ephemeral
	$(GO) run ./tools/benchserve -duration 60s -sink-duration 20s -retention 10s
	$(GO) run ./tools/benchserve -duration 60s -sink-duration 20s -retention 10s -fsync 100ms

.PHONY: test-memory
test-memory: ## The memory goal of dispatch serve: 1,000,000 queued 1 KiB messages on the file store under 256 MiB RSS, and the heap back after draining (not part of make test: the race detector's shadow memory would dominate)
	SNAVIO_TEST_1M=1 $(GO) test -count=1 -run '^TestMillionQueuedRSS$$' -v ./internal/devserver/

.PHONY: lambda
lambda: ## Build the Lambda bootstrap zips for provided.al2023: dist/lambda/bootstrap-{arm64,amd64}.zip (docs/lambda.md)
	@mkdir -p dist/lambda
	for arch in arm64 amd64; do \
		CGO_ENABLED=0 GOOS=linux GOARCH=$$arch $(GO) build -trimpath -tags lambda.norpc -ldflags "$(LDFLAGS)" -o dist/lambda/$$arch/bootstrap ./cmd/snavio-lambda; \
		$(GO) run ./tools/lambdazip -o dist/lambda/bootstrap-$$arch.zip dist/lambda/$$arch/bootstrap; \
	done
	@ls -l dist/lambda/*.zip

.PHONY: bench
bench: ## Run benchmarks and print each beside its floor, with the ratio
	$(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) -count $(BENCHCOUNT) ./... | tee bench.out
	$(GO) test -count=1 -run '^TestStartup(Cost|VersusGh)$$' -v ./internal/app/ | tee -a bench.out | grep -E 'startup over|startup versus|FAIL' || true
	@echo
	$(GO) run ./tools/benchratio < bench.out

.PHONY: cost
cost: ## The AWS cost of a million commands: the dispatcher's CPU measured now, list prices, memory sizes, 90% fast path (docs/cost.md)
	$(GO) test -run '^$$' -bench '^Benchmark(FastDispatch|StrictSlowPath)$$' -benchtime 20000x -count 3 ./pkg/dispatch/ | tee cost.bench
	$(GO) run ./tools/costmodel -bench cost.bench

.PHONY: fuzz
fuzz: ## Run every native fuzz target for FUZZTIME each
	./tools/fuzz-all.sh $(FUZZTIME)

.PHONY: release-check
release-check: $(GOBIN)/goreleaser ## goreleaser check
	$(GOBIN)/goreleaser check

.PHONY: snapshot
snapshot: $(GOBIN)/goreleaser ## Build release artefacts locally (no publish)
	$(GOBIN)/goreleaser release --snapshot --clean

$(GOBIN)/goreleaser:
	$(GO) install github.com/goreleaser/goreleaser/v2@$(GORELEASER_VERSION)

.PHONY: tools
tools: $(GOBIN)/staticcheck $(GOBIN)/goreleaser ## Install staticcheck and goreleaser

.PHONY: clean
clean: ## Remove build output
	rm -rf bin dist bench.out cost.bench
