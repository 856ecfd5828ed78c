"""The top layer: reads, pages and orchestration that span the domain apps.

Dependencies point down only: this package may import the domain apps (beliefs, goals, intents,
runs) and the kernel; nothing below imports it (the contracts in pyproject.toml say so, and CI runs
them). See docs/architecture.md, "Layers".
"""
