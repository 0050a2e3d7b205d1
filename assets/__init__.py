"""Data files shipped with kbcurate (relation schemas, sample configuration)."""
