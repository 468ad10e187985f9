import sys

from bertology.pipeline.launch import main

sys.exit(main())
