#!/usr/bin/env python
"""The Django shop's manage.py: ``python examples/django_shop/manage.py test orders``,
``... runserver``, ``... durq_worker``, ``... durq status``."""

import os
import sys
from pathlib import Path

if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "shop_site.settings")
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)
