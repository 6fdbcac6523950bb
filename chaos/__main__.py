"""`python -m chaos --size ci|soak`: see chaos/run.py."""

import sys

from chaos.run import main

sys.exit(main())
