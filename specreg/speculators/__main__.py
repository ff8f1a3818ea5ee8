import sys

from specreg.speculators.refresh import main

sys.exit(main())
