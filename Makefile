# vkllm — two commands matter: `make run` and `make test`. Both install what they need on a fresh
# Debian/Ubuntu machine first (apt packages only when missing, npm ci, the Wails CLI).

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := run

GO            ?= go
WAILS_VERSION := v2.16.0
WAILS         := $(shell $(GO) env GOPATH)/bin/wails
APP           := build/bin/vkllm-app
CLI           := bin/vkllm
SUDO          := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
# The commit bench history records, linked in for builds where go build stamps no VCS facts.
COMMIT        := $(shell c=$$(git rev-parse --short=8 HEAD 2>/dev/null) && { git diff --quiet HEAD 2>/dev/null || c=$$c+dirty; echo $$c; })
LDFLAGS       := -X github.com/vkllm/vkllm/engine/bench.linkedCommit=$(COMMIT)
# Build tags of every build and test: sqlite_fts5 compiles FTS5 into mattn/go-sqlite3, which the
# conversation search uses (a build without it falls back to a LIKE scan, store/search.go).
GOTAGS        := sqlite_fts5

# Debian packages: what building and running the window needs, and what the tests add to it.
APT_RUN  := gcc pkg-config libgtk-3-dev libwebkit2gtk-4.1-dev libvulkan-dev mesa-vulkan-drivers
APT_TEST := $(APT_RUN) vulkan-validationlayers xvfb xauth chromium xdotool imagemagick sqlite3

.PHONY: glslc run test build cli frontend planwasm deps-run deps-test apt-run apt-test node wails-cli vet gotest fuzz-short ui-tests e2e smoke screenshot bench-gpu clean

## run: install what is missing, build, and start the app with the embedded model
run: deps-run build
	./$(APP)

## test: install what is missing, then go vet, go test, a short fuzz run (fuzz-short), the frontend build, the e2e and window tests
test: deps-test vet gotest fuzz-short build ui-tests

deps-run: apt-run node frontend/node_modules/.package-lock.json wails-cli
deps-test: apt-test node frontend/node_modules/.package-lock.json wails-cli

apt-run:
	@bash .ci/apt-ensure $(APT_RUN)
apt-test:
	@bash .ci/apt-ensure $(APT_TEST)

# Node.js and npm: Debian's when there is none (Vite 8 needs Node 20.19 or newer).
node:
	@command -v node >/dev/null && command -v npm >/dev/null || bash .ci/apt-ensure nodejs npm
	@node -e 'const [a,b]=process.versions.node.split(".").map(Number); if (a<20||(a==20&&b<19)) { console.error("Node "+process.versions.node+" is too old for Vite 8: install Node.js 20.19 or newer"); process.exit(1) }'

frontend/node_modules/.package-lock.json: frontend/package-lock.json
	cd frontend && npm ci --no-audit --no-fund

wails-cli:
	@[ -x "$(WAILS)" ] && "$(WAILS)" version 2>/dev/null | grep -q "$(WAILS_VERSION)" || \
		(cd /tmp && $(GO) install github.com/wailsapp/wails/v2/cmd/wails@$(WAILS_VERSION))

## frontend: the Vite build into frontend/dist (embedded into the binaries)
frontend: frontend/node_modules/.package-lock.json planwasm
	cd frontend && npm run build

## planwasm: the resident plan as WebAssembly for the what-if (cmd/planwasm) and Go's
## wasm_exec.js, into frontend/src/assets/planwasm/ where Vite picks them up (not committed)
PLANWASM_DIR := frontend/src/assets/planwasm
planwasm:
	GOOS=js GOARCH=wasm CGO_ENABLED=0 $(GO) build -trimpath -ldflags "-s -w" -o $(PLANWASM_DIR)/plan.wasm ./cmd/planwasm
	@root=$$($(GO) env GOROOT); for f in "$$root/lib/wasm/wasm_exec.js" "$$root/misc/wasm/wasm_exec.js"; do \
		if [ -f "$$f" ]; then cp "$$f" $(PLANWASM_DIR)/wasm_exec.js; exit 0; fi; done; \
		echo "no wasm_exec.js under $$root (lib/wasm or misc/wasm): the Go installation is incomplete"; exit 1

## build: the desktop app (Wails, webkit2gtk 4.1) and the CLI
build: frontend cli
	$(WAILS) build -s -m -nosyncgomod -skipbindings -skipembedcreate -tags webkit2_41,$(GOTAGS) -ldflags "$(LDFLAGS)" -o vkllm-app

cli:
	$(GO) build -tags $(GOTAGS) -ldflags "$(LDFLAGS)" -o $(CLI) ./cmd/vkllm

vet:
	$(GO) vet -tags $(GOTAGS) ./...

# Vulkan tests run on Mesa lavapipe (mesa-vulkan-drivers), which needs no GPU, with the Khronos
# validation layer (vulkan-validationlayers) counting errors. The Vulkan packages run a second time
# under GOEXPERIMENT=cgocheck2, which checks every Go pointer handed to C. A current glslc (fetched
# by ../shared/tools/get-glslc.sh into .tools/vk) lets shaders/ check the committed SPIR-V is current.
# -timeout: go test's default 10 minutes per package is near what engine/vulkan takes on lavapipe under
# cgocheck2 on a busy 2-core machine; a hang still ends the run.
gotest: glslc
	$(GO) test -tags $(GOTAGS) -count=1 -timeout 30m ./...
	GOEXPERIMENT=cgocheck2 $(GO) test -tags $(GOTAGS) -count=1 -timeout 30m ./engine/vulkan/... ./shaders

## fuzz-short: every fuzz target for FUZZTIME executions (2000) from its committed corpus (testdata/fuzz); a
## crash it finds is written there as a new seed and fails the run (docs/RELIABILITY.md)
# A count, not a duration: go1.26's fuzz coordinator can fail a target with a bare "context
# deadline exceeded" when a -fuzztime duration ends under CPU load (golang/go#75804, fixed in 1.27).
FUZZTIME     ?= 2000x
FUZZ_TARGETS := engine/gguf:FuzzOpenBytes engine/model:FuzzLoadHyperparameters \
	engine/tokenizer:FuzzTokenizerFromGGUFMetadata engine/tokenizer:FuzzEncodePiecesRebuildTheInput \
	engine/chat/internal/jinja:FuzzRender engine/quant:FuzzDequantizeNeverPanics \
	sidecar:FuzzRequestBodies sidecar:FuzzPlanRequestDecoding cmd/vkllm:FuzzResultsImport app:FuzzWebBindingCalls
fuzz-short:
	@for t in $(FUZZ_TARGETS); do pkg=$${t%%:*}; fn=$${t##*:}; echo "fuzz $$fn in ./$$pkg for $(FUZZTIME)"; \
		$(GO) test -tags $(GOTAGS) ./$$pkg -run '^$$' -fuzz "^$$fn\$$" -fuzztime $(FUZZTIME) -fuzzminimizetime 200x || exit 1; done

GET_GLSLC := ../shared/tools/get-glslc.sh
# get-glslc.sh ends with `glslc --version | head -3` under pipefail, which can die of SIGPIPE
# (exit 141) after a good install: judge it by whether the glslc it installed runs.
glslc:
	@if [ -x .tools/vk/bin/glslc ]; then :; \
	elif [ -x "$(GET_GLSLC)" ]; then bash "$(GET_GLSLC)" .tools/vk || \
		{ .tools/vk/bin/glslc --version >/dev/null 2>&1 || { echo "get-glslc.sh failed: no current glslc"; exit 1; }; }; \
	else echo "no $(GET_GLSLC): the SPIR-V currency check will skip"; fi

## ui-tests: both UI suites in one node test run, so its summary closes the output (models.test
## writes its models with the CLI's synth)
ui-tests: $(APP) $(CLI)
	cd frontend && VKLLM_APP=../$(APP) VKLLM_CLI=../$(CLI) node --test e2e/chat.test.mjs e2e/gpu.test.mjs e2e/context.test.mjs e2e/bench.test.mjs e2e/markdown.test.mjs e2e/settings.test.mjs e2e/actions.test.mjs e2e/conversations.test.mjs e2e/whatif.test.mjs e2e/models.test.mjs e2e/window.test.mjs e2e/window-dialog.test.mjs

## e2e: headless Chromium against the browser-mode server (real sidecar, embedded model)
e2e: $(APP)
	cd frontend && VKLLM_APP=../$(APP) node --test e2e/chat.test.mjs e2e/gpu.test.mjs e2e/context.test.mjs e2e/bench.test.mjs e2e/markdown.test.mjs

## smoke: the real Wails window under Xvfb: screenshot, click, type, reply; a model picked in the native file dialog
smoke: $(APP) $(CLI)
	cd frontend && VKLLM_APP=../$(APP) VKLLM_CLI=../$(CLI) node --test e2e/window.test.mjs e2e/window-dialog.test.mjs

## screenshot: refresh docs/screenshot.png and docs/screenshot-chat-vulkan.png (a rendered markdown
## reply, the model resident on Vulkan: lavapipe with a 512 MiB pin) from the window under Xvfb
screenshot: $(APP)
	cd frontend && VKLLM_APP=../$(APP) WINDOW_SHOT=../docs/screenshot.png node --test e2e/window.test.mjs
	cd frontend && VKLLM_APP=../$(APP) WINDOW_SHOT=../docs/screenshot-chat-vulkan.png node --test e2e/window-vulkan.test.mjs

## bench-gpu: issue 16's table on this machine's GPU against llama.cpp:
##   make bench-gpu LLAMA_BENCH=/path/to/llama-bench [BENCH_GPU_FLAGS="--out DIR --models DIR"]
LLAMA_BENCH     ?=
BENCH_GPU_FLAGS ?=
bench-gpu: cli
	bash scripts/bench-gpu.sh $(BENCH_GPU_FLAGS) $(LLAMA_BENCH)

$(APP):
	$(MAKE) build

$(CLI):
	$(MAKE) cli

clean:
	rm -rf build/bin bin frontend/dist/assets frontend/dist/index.html $(PLANWASM_DIR)/plan.wasm $(PLANWASM_DIR)/wasm_exec.js
