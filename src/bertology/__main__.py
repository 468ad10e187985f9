import sys

from bertology.launch import main

sys.exit(main())
