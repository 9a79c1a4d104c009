"""Reading what was published: the independent audit and the state's verification
against the release store (docs/design.md section 9)."""
