"""python -m geopriv.cli"""

import sys

from . import main

sys.exit(main())
