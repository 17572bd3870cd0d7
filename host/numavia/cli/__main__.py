import sys

from numavia.cli import main

sys.exit(main())
