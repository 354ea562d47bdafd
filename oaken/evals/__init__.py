"""The retrieval eval: `python -m oaken.evals retrieval`."""
