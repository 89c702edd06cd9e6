"""Workload generators (``cosched trace generate``)."""

from .lublin import LublinParams, lublin_jobs

__all__ = ["LublinParams", "lublin_jobs"]
