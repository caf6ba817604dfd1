import sys

from lensapp.cli import main

sys.exit(main())
