"""Renderers: turn analysis results into text or files. They format; they never compute."""
