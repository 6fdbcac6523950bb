"""A job defined in a view module: only the URL configuration imports it, which workers never load."""

from django.http import HttpRequest, HttpResponse

from django_jobretry import job


@job
def sent_from_a_view(key: str) -> str:
    return key


def send(request: HttpRequest) -> HttpResponse:
    sent_from_a_view.enqueue("from a view")
    return HttpResponse("sent")
