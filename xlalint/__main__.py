import sys

from xlalint.cli import main

sys.exit(main())
