"""DOLL: distributed online learning on spot instances, re-implemented on Ray."""
