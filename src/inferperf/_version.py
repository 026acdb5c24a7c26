"""The version of inferperf: one source, read by packaging (pyproject's dynamic version) and by every layer.

A base module with no imports, so any layer may read the version without importing the
package root (which is the public API and pulls in more than a layer may import).
"""

__version__ = "0.1.0"
