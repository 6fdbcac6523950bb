"""How values are shown to people: durations and counts in words, payloads redacted."""
