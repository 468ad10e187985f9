import sys

from bertology.workflow.launch import main

sys.exit(main())
