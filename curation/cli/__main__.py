"""``python -m curation.cli``: the ``kbcurate`` command line."""

from curation.cli.main import main

raise SystemExit(main())
