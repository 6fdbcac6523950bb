from django.apps import AppConfig


class ShopConfig(AppConfig):
    """The example shop."""

    name = "example_project.shop"
    label = "shop"
