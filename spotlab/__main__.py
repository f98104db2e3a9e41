"""`python -m spotlab LAB_ID`: a lab's supervisor (started by spotlab.lab, not by hand)."""

import sys

from spotlab.supervisor import main

sys.exit(main())
