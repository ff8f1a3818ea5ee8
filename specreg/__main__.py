import sys

from specreg.cli.main import main

sys.exit(main())
