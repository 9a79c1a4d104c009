"""The writer side: drafting, validating and reporting, sign-off, publishing, recovery,
importing and the orchestration the DAGs call (docs/design.md section 9)."""
