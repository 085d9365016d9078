"""Data files -> validated, resolved Profiles; model ids -> Profile (layer 2).

``yaml_safe`` reads hostile YAML, ``files`` turns one file into its schema model (and resolves
inheritance), ``profile`` is the resolved form every layer above reads, ``index`` is the id/alias index,
``provenance`` says which file:line set a field, ``check`` is ``validate``, ``paths`` where data lives."""
from .index import Registry, Resolution, load_registry  # noqa: F401
from .profile import Profile  # noqa: F401
