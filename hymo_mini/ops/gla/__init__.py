"""The document's GDN recurrence, gated linear attention: its loop and its fast paths."""
