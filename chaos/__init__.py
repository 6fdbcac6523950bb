"""A chaos harness for django-jobretry: real workers, real faults, SQL invariants afterwards.

`make chaos-ci` runs a short version (CI, tests/integration/chaos/test_chaos_short.py),
`make chaos` the soak. docs/reliability.md explains what is injected, what is
checked and what the soak measured. Nothing here is imported by the product.
"""
