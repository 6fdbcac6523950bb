"""Adapters to other task systems; each is a Django app of its own (an adapter, layer 5)."""
