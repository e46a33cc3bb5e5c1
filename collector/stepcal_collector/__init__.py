"""stepcal measurement collector: PyTorch sweeps written straight into stepcal's measurement store.

Entry point: ``python collector/collect.py``. See docs/collector.md.
"""
