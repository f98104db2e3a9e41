"""The two schedulers behind one interface (see scheduling.base)."""
