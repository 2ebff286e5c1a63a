"""Settings of the Django shop. The database comes from the environment:

- ``SHOP_DB=sqlite`` (default): ``$SHOP_DATA/shop.sqlite3`` (tests: ``test.sqlite3``);
- ``SHOP_DB=postgres``: ``$SHOP_PG_NAME`` on ``$SHOP_PG_HOST:$SHOP_PG_PORT`` as
  ``$SHOP_PG_USER`` (the test runner creates ``test_<name>``).

durq's tables live in the same database (``DURQ`` names no URL), so an order and its job
commit together.
"""

import os
from pathlib import Path

DATA = Path(os.environ.get("SHOP_DATA", Path(__file__).resolve().parent.parent / ".data"))
DATA.mkdir(parents=True, exist_ok=True)

SECRET_KEY = "django-shop-example-not-a-secret"
DEBUG = os.environ.get("SHOP_DEBUG", "") == "1"
ALLOWED_HOSTS = ["*"]
ROOT_URLCONF = "shop_site.urls"
USE_TZ = True
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

INSTALLED_APPS = [
    "django.contrib.contenttypes",
    "durq.contrib.django",
    "orders",
]

if os.environ.get("SHOP_DB", "sqlite") == "postgres":
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": os.environ.get("SHOP_PG_NAME", "shop"),
            "USER": os.environ.get("SHOP_PG_USER", "postgres"),
            "HOST": os.environ.get("SHOP_PG_HOST", "127.0.0.1"),
            "PORT": os.environ.get("SHOP_PG_PORT", "5432"),
        }
    }
else:
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": str(DATA / "shop.sqlite3"),
            "TEST": {"NAME": str(DATA / "test.sqlite3")},  # durq needs a file, not :memory:
        }
    }

DURQ = {"DATABASE": "default"}
TEST_RUNNER = "durq.contrib.django.testing.DurqTestRunner"
