"""`python -m bert_mgpu.compat USER_SCRIPT.py [ARGS...]`: see `bert_mgpu/compat/runner.py`."""

import sys

from bert_mgpu.compat import runner

if __name__ == "__main__":
    sys.exit(runner.main())
