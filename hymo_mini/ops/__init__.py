"""The recurrence kernels, one folder per rule (placeholder: the lead's dispatcher goes here)."""
