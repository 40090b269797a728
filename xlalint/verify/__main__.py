import sys

from xlalint.verify import main

sys.exit(main())
