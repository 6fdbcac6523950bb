import pytest
from django.core.exceptions import ImproperlyConfigured

from example_project.database import database_from_url


def test_tcp_url() -> None:
    config = database_from_url("postgres://bob:s%40cret@db.internal:6543/shop")
    assert (config["USER"], config["PASSWORD"], config["HOST"], config["PORT"], config["NAME"]) == (
        "bob",
        "s@cret",
        "db.internal",
        "6543",
        "shop",
    )


def test_socket_url_as_pgserver_gives_it() -> None:
    config = database_from_url("postgresql://postgres:@/postgres?host=/tmp/pg sock")
    assert config["HOST"] == "/tmp/pg sock"
    assert config["NAME"] == "postgres"


@pytest.mark.parametrize("url", ["", "mysql://root@localhost/db"])
def test_unusable_url_says_what_to_do(url: str) -> None:
    with pytest.raises(ImproperlyConfigured, match="DATABASE_URL"):
        database_from_url(url)
