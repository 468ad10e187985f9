import sys

from bertology.cli import main

sys.exit(main())
