"""Reusable widgets of the app: the keyboard-first table, plots, progress line."""
