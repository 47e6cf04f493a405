# opcheck developer targets. Every target installs what it needs first (idempotent: the
# install step reruns only when pyproject.toml changed).
PY ?= python3
VENV := .venv
BIN := $(CURDIR)/$(VENV)/bin
STAMP := $(VENV)/.installed
MIRROR ?= ../shared/upstream
# The upstream repositories ../shared/upstream lacks (Ascend/mstt's advisor rules at the pin of
# sync/advisor.py), read whole from the project's test mirror: `sync` takes each repository from
# the first mirror that has it.
PROJECT_MIRROR ?= tests/fixtures/mirror
PYTEST_ARGS ?=
# The installed sub-packages (pyproject.toml lists the same): benchmarks/, tests/ and build/ are not.
PACKAGES := core scrapers sync db checker contrib env tracers web cli data
# The editable install is strict (a tree of links to the installed files only, so that
# opcheck.tests does not import): a file added to or removed from an installed folder changes
# that folder, and the next make reinstalls.
PACKAGE_DIRS := $(shell find $(PACKAGES) -type d -not -name __pycache__ 2>/dev/null)

.PHONY: install demo test lint typecheck catalog serve bench clean

install: $(STAMP)

# torch is pinned in constraints.txt (the pin users add their own packages with) so pip takes
# the CPU wheel on disk and never resolves a CUDA build for the `trace` extra. -qq: pip's
# errors only (a failed install still says why and stops make), so `make demo` is quiet until
# the report.
# torchvision's release paired with the torch in constraints.txt, and timm
ATLAS_VISION := torchvision==0.28.0 timm==1.0.31

$(STAMP): pyproject.toml constraints.txt $(PACKAGE_DIRS)
	@echo "== installing opcheck[trace,serve,dev,atlas,cluster] and torch (CPU) into $(VENV)"
	@test -x $(BIN)/python || $(PY) -m venv $(VENV)
	@$(BIN)/python -m pip install -qq --upgrade pip
	@$(BIN)/python -m pip install -qq -e '.[trace,serve,dev,atlas,cluster]' torch -c constraints.txt \
		--config-settings editable_mode=strict
	@# the atlas's torchvision and timm: --no-deps (never a second torch) into a folder of their
	@# own, which only the atlas's sandboxed traces put on the path (tracers/atlas_tvops.py):
	@# the registry's torchvision links CUDA torch and does not import beside the CPU build.
	@# 11 MB of wheels, ~3 s.
	@$(BIN)/python -m pip install -qq --no-deps --upgrade --target $(VENV)/opcheck-atlas-site \
		$(ATLAS_VISION) -c constraints.txt
	@touch $(STAMP)

demo: install
	@echo "== opcheck: the bundled example (data/examples/demo_model.py) on the newest release for this torch"
	@echo "\$$ opcheck --model data/examples/demo_model.py:build --fail-on never"
	@$(BIN)/opcheck --model data/examples/demo_model.py:build --fail-on never
	@echo
	@echo "== the same model on torch_npu 2.1.0.post4, an early 2.1 release"
	@echo "\$$ opcheck --model data/examples/demo_model.py:build --torch-npu 2.1.0.post4 --fail-on never"
	@$(BIN)/opcheck --model data/examples/demo_model.py:build --torch-npu 2.1.0.post4 --fail-on never
	@echo
	@echo "Next: opcheck op aten::isin.Tensor_Tensor_out (an op's history), opcheck releases,"
	@echo "      opcheck atlas zoo (9 well-known architectures x every release),"
	@echo "      make serve (browse the catalog at http://127.0.0.1:8001/)"

test: lint
	$(BIN)/python -m pytest $(PYTEST_ARGS)

lint: install typecheck
	$(BIN)/ruff check .

# The repository root is the `opcheck` package; mypy names modules after folders, so it checks
# the root through one link named `opcheck` (data/ holds example models written as users do).
typecheck: install
	rm -rf build/typecheck && mkdir -p build/typecheck
	ln -s $(CURDIR) build/typecheck/opcheck
	cd build/typecheck && $(BIN)/mypy --config-file $(CURDIR)/pyproject.toml -m opcheck -m opcheck.__main__ \
		$(foreach p,$(filter-out data,$(PACKAGES)),-p opcheck.$(p))

# The atlas (the zoo's nine models included) depends on the kernel facts: regenerate it with
# the snapshot.
catalog: install
	$(BIN)/opcheck sync --mirror $(MIRROR) --mirror $(PROJECT_MIRROR) --snapshot data/snapshot
	# the atlas of the installed model libraries (a failed architecture is a row, exit 1)
	$(BIN)/opcheck atlas zoo $$($(BIN)/python -c "from opcheck.checker.atlas import installed; print(*installed())") \
		-j 2 --snapshot data/snapshot --format markdown -o build/atlas.md || test $$? -eq 1

serve: install
	$(BIN)/opcheck serve

bench: install
	$(BIN)/python benchmarks/run_all.py

clean:
	rm -rf $(VENV) build .mypy_cache .pytest_cache .ruff_cache
