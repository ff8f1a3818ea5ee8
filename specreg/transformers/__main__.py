import sys

from specreg.transformers.refresh import main

sys.exit(main())
