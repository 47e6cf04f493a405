# opcheck developer targets. Every target installs what it needs first (idempotent: the
# install step reruns only when pyproject.toml changed).
PY ?= python3
VENV := .venv
BIN := $(CURDIR)/$(VENV)/bin
STAMP := $(VENV)/.installed
MIRROR ?= ../shared/upstream
PYTEST_ARGS ?=

.PHONY: install demo test lint typecheck catalog serve bench clean

install: $(STAMP)

# torch==2.13.0 is named explicitly so pip takes the CPU wheel on disk and never resolves
# a CUDA build for the `trace` extra.
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[trace,serve,dev]' 'torch==2.13.0'
	touch $(STAMP)

demo: install
	@echo "== opcheck: the bundled example (data/examples/demo_model.py) on the newest release for this torch"
	$(BIN)/opcheck --model data/examples/demo_model.py:build --fail-on never
	@echo
	@echo "== the same model on torch_npu 2.1.0.post4, an early 2.1 release"
	$(BIN)/opcheck --model data/examples/demo_model.py:build --torch-npu 2.1.0.post4 --fail-on never
	@echo
	@echo "Next: opcheck op aten::isin.Tensor_Tensor_out (an op's history), opcheck releases,"
	@echo "      opcheck zoo (9 well-known architectures x every release),"
	@echo "      make serve (browse the catalog at http://127.0.0.1:8001/)"

test: lint
	$(BIN)/python -m pytest $(PYTEST_ARGS)

lint: install typecheck
	$(BIN)/ruff check .

# mypy does not run setuptools' editable-install finder, so it checks a symlinked view of
# the package with the layout the wheel installs.
typecheck: install
	rm -rf build/typecheck && mkdir -p build/typecheck/opcheck
	for f in core/*.py core/py.typed; do ln -s $(CURDIR)/$$f build/typecheck/opcheck/; done
	for p in db cli scrapers tracers; do ln -s $(CURDIR)/$$p build/typecheck/opcheck/$$p; done
	cd build/typecheck && $(BIN)/mypy --config-file $(CURDIR)/pyproject.toml -p opcheck

# The zoo's coverage table depends on the kernel facts: regenerate it with the snapshot.
catalog: install
	$(BIN)/opcheck sync --mirror $(MIRROR) --snapshot data/snapshot
	$(BIN)/opcheck zoo --snapshot data/snapshot --format markdown

serve: install
	$(BIN)/opcheck serve

bench: install
	$(BIN)/python benchmarks/run_all.py

clean:
	rm -rf $(VENV) build .mypy_cache .pytest_cache .ruff_cache
