import sys

from specreg.cli import main

sys.exit(main())
