"""Readers of KB and corpus formats (floor 1): files in, Relations and Documents out."""

from kb_sources.errors import (
    CurationError,
    InputFormatError,
    SchemaError,
    TemplateError,
    UnknownNameError,
)
from kb_sources.types import Annotation, Document, Entity, Relation

__all__ = [
    "Annotation",
    "CurationError",
    "Document",
    "Entity",
    "InputFormatError",
    "Relation",
    "SchemaError",
    "TemplateError",
    "UnknownNameError",
]
